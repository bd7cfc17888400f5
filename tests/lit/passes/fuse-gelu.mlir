// RUN: fsdp-opt %s -split-input-file -fsdp-fuse-gelu | FileCheck %s

// GPT-2's tanh GELU as torch.onnx.export writes it.
// CHECK-LABEL: func.func @tanh_exported
// CHECK-SAME: (%[[X:.*]]: tensor<2x8xf32>)
// CHECK-NEXT: %[[Y:.*]] = fsdp.gelu %[[X]] {approximate = "tanh"} : tensor<2x8xf32>
// CHECK-NEXT: return %[[Y]]
func.func @tanh_exported(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %half = fsdp.constant dense<0.5> : tensor<f32>
  %one = fsdp.constant dense<1.0> : tensor<f32>
  %c = fsdp.constant dense<0.797884583> : tensor<f32>
  %k = fsdp.constant dense<0.044715> : tensor<f32>
  %x2 = fsdp.mul %x, %x : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %x3 = fsdp.mul %x, %x2 : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %a = fsdp.mul %k, %x3 : tensor<f32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %b = fsdp.add %x, %a : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %u = fsdp.mul %c, %b : tensor<f32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %t = fsdp.tanh %u : tensor<2x8xf32>
  %s = fsdp.add %one, %t : tensor<f32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %p = fsdp.mul %x, %s : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %y = fsdp.mul %half, %p : tensor<f32>, tensor<2x8xf32> -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// HuggingFace's NewGELU: (0.5 * x) * (1 + tanh(c * (x + 0.044715 * pow(x, 3)))),
// other orders and association.
// CHECK-LABEL: func.func @tanh_newgelu
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT: %[[Y:.*]] = fsdp.gelu %[[X]] {approximate = "tanh"} : tensor<4xf32>
// CHECK-NEXT: return %[[Y]]
func.func @tanh_newgelu(%x: tensor<4xf32>) -> tensor<4xf32> {
  %half = fsdp.constant dense<0.5> : tensor<f32>
  %one = fsdp.constant dense<1.0> : tensor<f32>
  %three = fsdp.constant dense<3.0> : tensor<f32>
  %c = fsdp.constant dense<0.797884583> : tensor<f32>
  %k = fsdp.constant dense<0.044715> : tensor<f32>
  %hx = fsdp.mul %half, %x : tensor<f32>, tensor<4xf32> -> tensor<4xf32>
  %x3 = fsdp.pow %x, %three : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %a = fsdp.mul %x3, %k : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %b = fsdp.add %a, %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %u = fsdp.mul %b, %c : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %t = fsdp.tanh %u : tensor<4xf32>
  %s = fsdp.add %t, %one : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %y = fsdp.mul %hx, %s : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// The exact GELU below opset 20: x * 0.5 * (1 + erf(x / sqrt(2))).
// CHECK-LABEL: func.func @erf_exported
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT: %[[Y:.*]] = fsdp.gelu %[[X]] : tensor<4xf32>
// CHECK-NEXT: return %[[Y]]
func.func @erf_exported(%x: tensor<4xf32>) -> tensor<4xf32> {
  %half = fsdp.constant dense<0.5> : tensor<f32>
  %one = fsdp.constant dense<1.0> : tensor<f32>
  %r2 = fsdp.constant dense<1.41421354> : tensor<f32>
  %d = fsdp.div %x, %r2 : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %e = fsdp.erf %d : tensor<4xf32>
  %s = fsdp.add %e, %one : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %p = fsdp.mul %x, %half : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %y = fsdp.mul %p, %s : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// An intermediate with another user stays (and keeps what it needs); the
// GELU itself is still fused.
// CHECK-LABEL: func.func @shared_intermediate
// CHECK: %[[T:.*]] = fsdp.tanh
// CHECK: %[[Y:.*]] = fsdp.gelu %{{.*}} {approximate = "tanh"}
// CHECK: return %[[Y]], %[[T]]
func.func @shared_intermediate(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %half = fsdp.constant dense<0.5> : tensor<f32>
  %one = fsdp.constant dense<1.0> : tensor<f32>
  %c = fsdp.constant dense<0.797884583> : tensor<f32>
  %k = fsdp.constant dense<0.044715> : tensor<f32>
  %x2 = fsdp.mul %x, %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %x3 = fsdp.mul %x2, %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %a = fsdp.mul %k, %x3 : tensor<f32>, tensor<4xf32> -> tensor<4xf32>
  %b = fsdp.add %x, %a : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %u = fsdp.mul %c, %b : tensor<f32>, tensor<4xf32> -> tensor<4xf32>
  %t = fsdp.tanh %u : tensor<4xf32>
  %s = fsdp.add %one, %t : tensor<f32>, tensor<4xf32> -> tensor<4xf32>
  %p = fsdp.mul %x, %s : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %y = fsdp.mul %half, %p : tensor<f32>, tensor<4xf32> -> tensor<4xf32>
  return %y, %t : tensor<4xf32>, tensor<4xf32>
}

// -----

// Not a GELU: the wrong constant (0.4 instead of 0.5), and a tanh of
// something else. Both stay as they are.
// CHECK-LABEL: func.func @near_misses
// CHECK-NOT: fsdp.gelu
// CHECK: return
func.func @near_misses(%x: tensor<4xf32>, %z: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %half = fsdp.constant dense<0.5> : tensor<f32>
  %point4 = fsdp.constant dense<0.4> : tensor<f32>
  %one = fsdp.constant dense<1.0> : tensor<f32>
  %c = fsdp.constant dense<0.797884583> : tensor<f32>
  %k = fsdp.constant dense<0.044715> : tensor<f32>
  %x2 = fsdp.mul %x, %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %x3 = fsdp.mul %x2, %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %a = fsdp.mul %k, %x3 : tensor<f32>, tensor<4xf32> -> tensor<4xf32>
  %b = fsdp.add %x, %a : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %u = fsdp.mul %c, %b : tensor<f32>, tensor<4xf32> -> tensor<4xf32>
  %t = fsdp.tanh %u : tensor<4xf32>
  %s = fsdp.add %one, %t : tensor<f32>, tensor<4xf32> -> tensor<4xf32>
  %p = fsdp.mul %x, %s : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %y = fsdp.mul %point4, %p : tensor<f32>, tensor<4xf32> -> tensor<4xf32>
  %tz = fsdp.tanh %z : tensor<4xf32>
  %sz = fsdp.add %one, %tz : tensor<f32>, tensor<4xf32> -> tensor<4xf32>
  %pz = fsdp.mul %x, %sz : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %yz = fsdp.mul %half, %pz : tensor<f32>, tensor<4xf32> -> tensor<4xf32>
  return %y, %yz : tensor<4xf32>, tensor<4xf32>
}
