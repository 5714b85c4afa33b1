// RUN: et-opt %s --et-to-out-variants | FileCheck %s

// The model's call structure (etmlir.io_structure, written by etmlir.export) moves from the edge
// function to the etx method unchanged: the serializer writes it into the .pte.
// CHECK-LABEL: func.func @main()
// CHECK-SAME: etmlir.io_structure = "{\22inputs\22:{\22tuple\22:[{\22tuple\22:[{\22dict\22:[0],\22keys\22:[\22a\22]},{\22const\22:3}]},{\22dict\22:[]}]},\22outputs\22:{\22tuple\22:[0,{\22const\22:null}]},\22arg_names\22:[\22inputs\22,\22n\22]}"
// CHECK-SAME: etx.method = "forward"
func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> attributes {etmlir.io_structure = "{\22inputs\22:{\22tuple\22:[{\22tuple\22:[{\22dict\22:[0],\22keys\22:[\22a\22]},{\22const\22:3}]},{\22dict\22:[]}]},\22outputs\22:{\22tuple\22:[0,{\22const\22:null}]},\22arg_names\22:[\22inputs\22,\22n\22]}"} {
  %0 = "edge.relu"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
