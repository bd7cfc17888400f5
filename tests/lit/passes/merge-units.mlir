// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units -fsdp-merge-units=merge-units=2 2>/dev/null | FileCheck %s
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units -fsdp-merge-units=merge-units=3 2>/dev/null | FileCheck %s --check-prefix=THREE
// RUN: not fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-merge-units=merge-units=2 2>&1 | FileCheck %s --check-prefix=NOUNITS
// RUN: not fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units -fsdp-merge-units=merge-units=0 2>&1 | FileCheck %s --check-prefix=ZERO

// Pairs of consecutive blocks become one unit each, in block order.
// CHECK: fsdp.unit @"layers.0+layers.1" {params = [@layers.0.w, @layers.1.w]}
// CHECK-NEXT: fsdp.unit @"layers.2+layers.3" {params = [@layers.2.w, @layers.3.w]}
// CHECK-NOT: fsdp.unit

// Groups of three: the fourth block is left alone.
// THREE: fsdp.unit @"layers.0+layers.1+layers.2" {params = [@layers.0.w, @layers.1.w, @layers.2.w]}
// THREE-NEXT: fsdp.unit @layers.3 {params = [@layers.3.w]}

// NOUNITS: error: --merge-units needs fsdp.unit ops: run fsdp-wrap-units first
// ZERO: error: --merge-units must be at least 1, got 0
fsdp.parameter @"layers.0.w" : tensor<3x3xf32> {module_path = "layers.0"}
fsdp.parameter @"layers.1.w" : tensor<3x3xf32> {module_path = "layers.1"}
fsdp.parameter @"layers.2.w" : tensor<3x3xf32> {module_path = "layers.2"}
fsdp.parameter @"layers.3.w" : tensor<3x3xf32> {module_path = "layers.3"}
func.func @forward(%x: tensor<2x3xf32> {fsdp.name = "x"}) -> (tensor<2x3xf32> {fsdp.name = "y"}) {
  %w0 = fsdp.get_parameter @"layers.0.w" : tensor<3x3xf32>
  %h0 = fsdp.matmul %x, %w0 : tensor<2x3xf32>, tensor<3x3xf32> -> tensor<2x3xf32>
  %r0 = fsdp.tanh %h0 : tensor<2x3xf32>
  %w1 = fsdp.get_parameter @"layers.1.w" : tensor<3x3xf32>
  %h1 = fsdp.matmul %r0, %w1 : tensor<2x3xf32>, tensor<3x3xf32> -> tensor<2x3xf32>
  %r1 = fsdp.tanh %h1 : tensor<2x3xf32>
  %w2 = fsdp.get_parameter @"layers.2.w" : tensor<3x3xf32>
  %h2 = fsdp.matmul %r1, %w2 : tensor<2x3xf32>, tensor<3x3xf32> -> tensor<2x3xf32>
  %r2 = fsdp.tanh %h2 : tensor<2x3xf32>
  %w3 = fsdp.get_parameter @"layers.3.w" : tensor<3x3xf32>
  %h3 = fsdp.matmul %r2, %w3 : tensor<2x3xf32>, tensor<3x3xf32> -> tensor<2x3xf32>
  return %h3 : tensor<2x3xf32>
}
