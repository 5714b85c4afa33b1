// RUN: et-opt %s --split-input-file --load=%S/Inputs/custom_ops.py --et-to-edge | FileCheck %s

// Scalar arguments become 0-d tensor operands; ints, lists and bools become attributes.
// CHECK-LABEL: func.func @scalars(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: %[[ALPHA:.*]] = "edge.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
// CHECK: %[[ADD:.*]] = "edge.add_tensor"(%arg0, %arg1, %[[ALPHA]]) : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<i64>) -> tensor<2x3xf32>
// CHECK: %[[HALF:.*]] = "edge.constant"() {value = dense<5.000000e-01> : tensor<f64>} : () -> tensor<f64>
// CHECK: %[[MUL:.*]] = "edge.mul_scalar"(%[[ADD]], %[[HALF]]) : (tensor<2x3xf32>, tensor<f64>) -> tensor<2x3xf32>
// CHECK: "edge.softmax"(%[[MUL]]) {dim = 1 : i64, half_to_float = false}
// CHECK-NOT: torch.
func.func @scalars(%x: !torch.vtensor<[2,3],f32>, %y: !torch.vtensor<[2,3],f32>) -> !torch.vtensor<[2,3],f32> {
  %int2 = torch.constant.int 2
  %half = torch.constant.float 5.000000e-01
  %int1 = torch.constant.int 1
  %false = torch.constant.bool false
  %0 = torch.aten.add.Tensor %x, %y, %int2 : !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>, !torch.int -> !torch.vtensor<[2,3],f32>
  %1 = torch.aten.mul.Scalar %0, %half : !torch.vtensor<[2,3],f32>, !torch.float -> !torch.vtensor<[2,3],f32>
  %2 = torch.aten._softmax %1, %int1, %false : !torch.vtensor<[2,3],f32>, !torch.int, !torch.bool -> !torch.vtensor<[2,3],f32>
  return %2 : !torch.vtensor<[2,3],f32>
}

// -----

// Views become their copy variants; a weight becomes an edge.constant over the same payload.
// CHECK-LABEL: func.func @views
// CHECK: %[[W:.*]] = "edge.constant"() {etmlir.param = "fc.weight", value = dense_resource<fc_weight> : tensor<3x2xf32>}
// CHECK: %[[T:.*]] = "edge.permute_copy"(%[[W]]) {dims = array<i64: 1, 0>} : (tensor<3x2xf32>) -> tensor<2x3xf32>
// CHECK: "edge.view_copy"(%[[T]]) {size = array<i64: 6>} : (tensor<2x3xf32>) -> tensor<6xf32>
func.func @views() -> !torch.vtensor<[6],f32> {
  %w = torch.vtensor.literal(dense_resource<fc_weight> : tensor<3x2xf32>) {etmlir.param = "fc.weight"} : !torch.vtensor<[3,2],f32>
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int6 = torch.constant.int 6
  %perm = torch.prim.ListConstruct %int1, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.aten.permute %w, %perm : !torch.vtensor<[3,2],f32>, !torch.list<int> -> !torch.vtensor<[2,3],f32>
  %size = torch.prim.ListConstruct %int6 : (!torch.int) -> !torch.list<int>
  %1 = torch.aten.view %0, %size : !torch.vtensor<[2,3],f32>, !torch.list<int> -> !torch.vtensor<[6],f32>
  return %1 : !torch.vtensor<[6],f32>
}
{-#
  dialect_resources: {
    builtin: {
      fc_weight: "0x040000000000803F0000004000004040000080400000A0400000C040"
    }
  }
#-}

// -----

// Integer literals get the edge's signless types. A signed dense_resource keeps its attribute (same
// blob, nothing copied) under a signless result type; a small dense literal is rebuilt signless.
// CHECK-LABEL: func.func @integer_literals
// CHECK: %[[I:.*]] = "edge.constant"() {etmlir.param = "lifted_tensor_0", value = dense_resource<lifted_tensor_0> : tensor<2xsi64>} : () -> tensor<2xi64>
// CHECK: %[[S:.*]] = "edge.constant"() {value = dense<3> : tensor<1xi16>} : () -> tensor<1xi16>
// CHECK: %[[M:.*]] = "edge.constant"() {value = dense_resource<mask> : tensor<2xi1>} : () -> tensor<2xi1>
// CHECK: "edge.index_tensor"(%arg0, %[[I]]) {indices_present = array<i1: true>} : (tensor<4x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
// CHECK: "edge.mul_tensor"(%{{.*}}, %[[S]]) : (tensor<2x3xf32>, tensor<1xi16>) -> tensor<2x3xf32>
// CHECK: lifted_tensor_0: "0x0800000000000000000000000200000000000000"
func.func @integer_literals(%x: !torch.vtensor<[4,3],f32>) -> (!torch.vtensor<[2,3],f32>, !torch.vtensor<[2],i1>) {
  %idx = torch.vtensor.literal(dense_resource<lifted_tensor_0> : tensor<2xsi64>) {etmlir.param = "lifted_tensor_0"} : !torch.vtensor<[2],si64>
  %three = torch.vtensor.literal(dense<3> : tensor<1xsi16>) : !torch.vtensor<[1],si16>
  %mask = torch.vtensor.literal(dense_resource<mask> : tensor<2xi1>) : !torch.vtensor<[2],i1>
  %list = torch.prim.ListConstruct %idx : (!torch.vtensor<[2],si64>) -> !torch.list<optional<vtensor>>
  %0 = torch.aten.index.Tensor %x, %list : !torch.vtensor<[4,3],f32>, !torch.list<optional<vtensor>> -> !torch.vtensor<[2,3],f32>
  %1 = torch.aten.mul.Tensor %0, %three : !torch.vtensor<[2,3],f32>, !torch.vtensor<[1],si16> -> !torch.vtensor<[2,3],f32>
  return %1, %mask : !torch.vtensor<[2,3],f32>, !torch.vtensor<[2],i1>
}
{-#
  dialect_resources: {
    builtin: {
      lifted_tensor_0: "0x0800000000000000000000000200000000000000",
      mask: "0x010000000100"
    }
  }
#-}

// -----

// A *_copy op called directly is its edge op; a non-core view becomes its declared copy variant.
// CHECK-LABEL: func.func @copy_variants
// CHECK: %[[V:.*]] = "edge.view_copy"(%arg0) {size = array<i64: 12>} : (tensor<2x6xf32>) -> tensor<12xf32>
// CHECK: "edge.unfold_copy"(%[[V]]) {dimension = 0 : i64, size = 3 : i64, step = 3 : i64} : (tensor<12xf32>) -> tensor<4x3xf32>
func.func @copy_variants(%x: !torch.vtensor<[2,6],f32>) -> !torch.vtensor<[4,3],f32> {
  %int0 = torch.constant.int 0
  %int3 = torch.constant.int 3
  %int12 = torch.constant.int 12
  %size = torch.prim.ListConstruct %int12 : (!torch.int) -> !torch.list<int>
  %0 = torch.aten.view_copy %x, %size : !torch.vtensor<[2,6],f32>, !torch.list<int> -> !torch.vtensor<[12],f32>
  %1 = torch.aten.unfold %0, %int0, %int3, %int3 : !torch.vtensor<[12],f32>, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[4,3],f32>
  return %1 : !torch.vtensor<[4,3],f32>
}

// -----

// Multiple results stay multiple results; a Tensor[] result becomes variadic results. IRDL
// gives a variadic group one type, so results of different shapes are cast to their own types;
// the shared `?` type records each result's own static size as its upper bound.
// CHECK-LABEL: func.func @multi
// CHECK: %[[LN:.*]]:3 = "edge.native_layer_norm"(%arg0, %arg1, %arg1) {eps = 1.000000e-05 : f64, normalized_shape = array<i64: 4>, operandSegmentSizes = array<i32: 1, 1, 1, 0>}
// CHECK-SAME: -> (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
// CHECK: %[[S:.*]]:2 = "edge.split_with_sizes_copy"(%[[LN]]#0) {dim = 1 : i64, etmlir.upper_bounds = [array<i64: 2, 1>, array<i64: 2, 3>], split_sizes = array<i64: 1, 3>} : (tensor<2x4xf32>) -> (tensor<2x?xf32>, tensor<2x?xf32>)
// CHECK: %[[A:.*]] = tensor.cast %[[S]]#0 : tensor<2x?xf32> to tensor<2x1xf32>
// CHECK: %[[B:.*]] = tensor.cast %[[S]]#1 : tensor<2x?xf32> to tensor<2x3xf32>
// CHECK: return %[[A]], %[[B]]
func.func @multi(%x: !torch.vtensor<[2,4],f32>, %w: !torch.vtensor<[4],f32>) -> (!torch.vtensor<[2,1],f32>, !torch.vtensor<[2,3],f32>) {
  %int1 = torch.constant.int 1
  %int3 = torch.constant.int 3
  %int4 = torch.constant.int 4
  %eps = torch.constant.float 1.000000e-05
  %shape = torch.prim.ListConstruct %int4 : (!torch.int) -> !torch.list<int>
  %out, %mean, %rstd = torch.aten.native_layer_norm %x, %shape, %w, %w, %eps : !torch.vtensor<[2,4],f32>, !torch.list<int>, !torch.vtensor<[4],f32>, !torch.vtensor<[4],f32>, !torch.float -> !torch.vtensor<[2,4],f32>, !torch.vtensor<[2,1],f32>, !torch.vtensor<[2,1],f32>
  %sizes = torch.prim.ListConstruct %int1, %int3 : (!torch.int, !torch.int) -> !torch.list<int>
  %parts = torch.aten.split_with_sizes %out, %sizes, %int1 : !torch.vtensor<[2,4],f32>, !torch.list<int>, !torch.int -> !torch.list<vtensor>
  %a, %b = torch.prim.ListUnpack %parts : !torch.list<vtensor> -> !torch.vtensor<[2,1],f32>, !torch.vtensor<[2,3],f32>
  return %a, %b : !torch.vtensor<[2,1],f32>, !torch.vtensor<[2,3],f32>
}

// -----

// A dynamic dim stays dynamic: run-time sizes travel in sym_values, and every dynamic
// result carries its upper bound, computed from the input's declared range.
// CHECK-LABEL: func.func @dynamic(%arg0: tensor<1x?x8xf32> {etmlir.dynamic_dims = {"1" = {max = 64 : i64, min = 2 : i64, symbol = "s0"}}}) -> tensor<?x16xf32>
// CHECK: %[[N:.*]] = "edge.sym_size_int"(%arg0) {dim = 1 : i64} : (tensor<1x?x8xf32>) -> tensor<i64>
// CHECK: %[[CAT:.*]] = "edge.cat"(%arg0, %arg0) {dim = 2 : i64, etmlir.upper_bounds = [array<i64: 1, 64, 16>]}
// CHECK: "edge.view_copy"(%[[CAT]], %[[N]]) {etmlir.upper_bounds = [array<i64: 64, 16>], size = array<i64: -9223372036854775808, 16>} : (tensor<1x?x16xf32>, tensor<i64>) -> tensor<?x16xf32>
func.func @dynamic(%x: !torch.vtensor<[1,?,8],f32> {etmlir.dynamic_dims = {"1" = {max = 64 : i64, min = 2 : i64, symbol = "s0"}}}) -> !torch.vtensor<[?,16],f32> {
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int16 = torch.constant.int 16
  %n = torch.aten.size.int %x, %int1 : !torch.vtensor<[1,?,8],f32>, !torch.int -> !torch.int
  %list = torch.prim.ListConstruct %x, %x : (!torch.vtensor<[1,?,8],f32>, !torch.vtensor<[1,?,8],f32>) -> !torch.list<vtensor>
  %0 = torch.aten.cat %list, %int2 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[1,?,16],f32>
  %size = torch.prim.ListConstruct %n, %int16 : (!torch.int, !torch.int) -> !torch.list<int>
  %1 = torch.aten.view %0, %size : !torch.vtensor<[1,?,16],f32>, !torch.list<int> -> !torch.vtensor<[?,16],f32>
  return %1 : !torch.vtensor<[?,16],f32>
}

// -----

// Arithmetic on sizes becomes the edge ops of its families (on 0-d i64 tensors, like
// sym_size_int), ops on constants fold, and a size used as a tensor becomes a scalar_tensor.
// Upper bounds follow the arithmetic: 16 * 32 for the product, max(16 // 2, 6) for the max.
// CHECK-LABEL: func.func @size_arithmetic
// CHECK: %[[N0:.*]] = "edge.sym_size_int"(%arg0) {dim = 0 : i64}
// CHECK: %[[N1:.*]] = "edge.sym_size_int"(%arg0) {dim = 1 : i64}
// CHECK: %[[NUMEL:.*]] = "edge.sym_mul"(%[[N0]], %[[N1]]) : (tensor<i64>, tensor<i64>) -> tensor<i64>
// CHECK: "edge.view_copy"(%arg0, %[[NUMEL]]) {etmlir.upper_bounds = [array<i64: 512>], size = array<i64: -9223372036854775808>}
// CHECK: %[[TWO:.*]] = "edge.constant"() {value = dense<2> : tensor<i64>}
// CHECK: %[[HALF:.*]] = "edge.sym_floordiv"(%[[N0]], %[[TWO]]) : (tensor<i64>, tensor<i64>) -> tensor<i64>
// CHECK: %[[SIX:.*]] = "edge.constant"() {value = dense<6> : tensor<i64>}
// CHECK: %[[MAX:.*]] = "edge.sym_max"(%[[HALF]], %[[SIX]]) : (tensor<i64>, tensor<i64>) -> tensor<i64>
// CHECK: "edge.full"(%{{.*}}, %[[MAX]]) {device = "cpu", etmlir.upper_bounds = [array<i64: 8>]
// CHECK: %[[T:.*]] = "edge.scalar_tensor"(%[[N1]]) {dtype = i64} : (tensor<i64>) -> tensor<i64>
// CHECK: "edge.sub_tensor"(%[[T]], %arg0, %{{.*}}) {etmlir.upper_bounds = [array<i64: 16, 32>]}
func.func @size_arithmetic(%x: !torch.vtensor<[?,?],f32> {etmlir.dynamic_dims = {"0" = {max = 16 : i64, min = 2 : i64, symbol = "s0"}, "1" = {max = 32 : i64, min = 2 : i64, symbol = "s1"}}}) -> (!torch.vtensor<[?],f32>, !torch.vtensor<[?],f32>, !torch.vtensor<[?,?],f32>) {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int3 = torch.constant.int 3
  %float1 = torch.constant.float 1.000000e+00
  %none = torch.constant.none
  %false = torch.constant.bool false
  %cpu = torch.constant.device "cpu"
  %n0 = torch.aten.size.int %x, %int0 : !torch.vtensor<[?,?],f32>, !torch.int -> !torch.int
  %n1 = torch.aten.size.int %x, %int1 : !torch.vtensor<[?,?],f32>, !torch.int -> !torch.int
  %numel = torch.aten.mul.int %n0, %n1 : !torch.int, !torch.int -> !torch.int
  %flat_size = torch.prim.ListConstruct %numel : (!torch.int) -> !torch.list<int>
  %flat = torch.aten.view %x, %flat_size : !torch.vtensor<[?,?],f32>, !torch.list<int> -> !torch.vtensor<[?],f32>
  %six = torch.aten.mul.int %int2, %int3 : !torch.int, !torch.int -> !torch.int
  %half = torch.aten.floordiv.int %n0, %int2 : !torch.int, !torch.int -> !torch.int
  %m = torch.prim.max.int %half, %six : !torch.int, !torch.int -> !torch.int
  %full_size = torch.prim.ListConstruct %m : (!torch.int) -> !torch.list<int>
  %full = torch.aten.full %full_size, %float1, %none, %none, %cpu, %false : !torch.list<int>, !torch.float, !torch.none, !torch.none, !torch.Device, !torch.bool -> !torch.vtensor<[?],f32>
  %t = torch.prim.NumToTensor.Scalar %n1 : !torch.int -> !torch.vtensor<[],si64>
  %scaled = torch.aten.sub.Tensor %t, %x, %int1 : !torch.vtensor<[],si64>, !torch.vtensor<[?,?],f32>, !torch.int -> !torch.vtensor<[?,?],f32>
  return %flat, %full, %scaled : !torch.vtensor<[?],f32>, !torch.vtensor<[?],f32>, !torch.vtensor<[?,?],f32>
}

// -----

// A custom op registered with torch.library passes through with its name, schema and constants.
// CHECK-LABEL: func.func @custom
// CHECK: "edge.custom_op"(%arg0) {args = {dims = array<i64: 0, 1>, factor = 2.500000e+00 : f64}, op = "etmlir_test::scale_by", schema = "etmlir_test::scale_by(Tensor x, float factor, int[] dims) -> Tensor"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
func.func @custom(%x: !torch.vtensor<[2,3],f32>) -> !torch.vtensor<[2,3],f32> {
  %f = torch.constant.float 2.500000e+00
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %dims = torch.prim.ListConstruct %int0, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.operator "etmlir_test.scale_by"(%x, %f, %dims) : (!torch.vtensor<[2,3],f32>, !torch.float, !torch.list<int>) -> !torch.vtensor<[2,3],f32>
  return %0 : !torch.vtensor<[2,3],f32>
}

// -----

// _to_copy becomes a dim-order copy: the memory format is spelled as a dim order.
// CHECK-LABEL: func.func @layout
// CHECK: "edge.to_dim_order_copy"(%arg0) {dim_order = array<i64: 0, 2, 3, 1>, dtype = f16, non_blocking = false} : (tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf16>
func.func @layout(%x: !torch.vtensor<[1,2,3,4],f32>) -> !torch.vtensor<[1,2,3,4],f16> {
  %f16 = torch.constant.int 5
  %none = torch.constant.none
  %false = torch.constant.bool false
  %channels_last = torch.constant.int 2
  %0 = torch.aten._to_copy %x, %f16, %none, %none, %none, %false, %channels_last : !torch.vtensor<[1,2,3,4],f32>, !torch.int, !torch.none, !torch.none, !torch.none, !torch.bool, !torch.int -> !torch.vtensor<[1,2,3,4],f16>
  return %0 : !torch.vtensor<[1,2,3,4],f16>
}
