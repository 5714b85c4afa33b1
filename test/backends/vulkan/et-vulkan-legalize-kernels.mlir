// RUN: et-opt %s --et-vulkan-legalize-kernels | FileCheck %s

// erf (GELU) becomes a polynomial on exp; batch norm's f64 epsilon becomes an f32 constant; the
// value check torch-mlir leaves is dropped (a shader cannot stop); the kernel records the
// argument it stores to.
// CHECK: gpu.func @k0({{.*}}) kernel attributes {etmlir.writes = array<i32: 1>
// CHECK-NOT: math.erf
// CHECK-NOT: f64
// CHECK-NOT: cf.assert
// CHECK: arith.constant 0.32759{{.*}} : f32
// CHECK: math.exp
// CHECK: arith.select
// CHECK: arith.constant 9.99999974E-6 : f32
module attributes {gpu.container_module} {
  gpu.module @k0 {
    gpu.func @k0(%x: memref<4xf32>, %y: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %eps = arith.constant 1.0e-05 : f64
      %v = memref.load %x[%c0] : memref<4xf32>
      %e = math.erf %v : f32
      %f = arith.truncf %eps : f64 to f32
      %s = arith.addf %e, %f : f32
      %ok = arith.cmpf one, %s, %f : f32
      cf.assert %ok, "unimplemented: tensor with zero element"
      memref.store %s, %y[%c0] : memref<4xf32>
      gpu.return
    }
  }
}
