// RUN: fsdp-opt %s -fsdp-wrap-units -verify-diagnostics | FileCheck %s
// RUN: not fsdp-opt %s '-fsdp-wrap-units=wrap=transformer:decoder' 2>&1 | FileCheck %s --check-prefix=NOMATCH

// Block families as real code names them: torchvision's
// `encoder.layers.encoder_layer_N` (an index after '_'), with a Sequential
// MLP inside (`mlp.0`, `mlp.3`: a family of its own, not isomorphic, and
// inside the blocks anyway), and a second, separate family (`heads.N`).
// The first block also holds a buffer the other blocks share (merged by
// the exporter): it belongs to no block.
// CHECK-DAG: fsdp.unit @encoder.layers.encoder_layer_0 {params = [@encoder.layers.encoder_layer_0.ln.w, @encoder.layers.encoder_layer_0.mlp.0.w, @encoder.layers.encoder_layer_0.mlp.3.w]}
// CHECK-DAG: fsdp.unit @encoder.layers.encoder_layer_1 {params = [@encoder.layers.encoder_layer_1.ln.w, @encoder.layers.encoder_layer_1.mlp.0.w, @encoder.layers.encoder_layer_1.mlp.3.w]}
// CHECK-DAG: fsdp.unit @encoder.layers.encoder_layer_2 {params =
// CHECK-DAG: fsdp.unit @heads.0 {params = [@heads.0.w]}
// CHECK-DAG: fsdp.unit @heads.1 {params = [@heads.1.w]}
// CHECK-DAG: fsdp.unit @root {params = [@embed.w, @encoder.layers.encoder_layer_0.mask], reshard_after_forward = false}
// NOMATCH: error: --wrap=transformer:decoder matches no repeated block; repeated blocks found: encoder.layers.encoder_layer (3 blocks), heads (2 blocks)

// expected-remark @+1 {{unit 'root': 2 parameters, 32 elements (transformer policy)}}
fsdp.parameter @embed.w : tensor<4x4xf32> {module_path = "embed"}
// expected-remark @+1 {{'encoder.layers.encoder_layer_0.mask' is in no unit of 'encoder.layers.encoder_layer'}}
fsdp.parameter @encoder.layers.encoder_layer_0.mask : tensor<4x4xf32> {module_path = "encoder.layers.encoder_layer_0"}
// expected-remark @+1 {{unit 'encoder.layers.encoder_layer_0': 3 parameters, 20 elements (transformer policy)}}
fsdp.parameter @encoder.layers.encoder_layer_0.ln.w : tensor<4xf32> {module_path = "encoder.layers.encoder_layer_0.ln"}
fsdp.parameter @encoder.layers.encoder_layer_0.mlp.0.w : tensor<2x4xf32> {module_path = "encoder.layers.encoder_layer_0.mlp.0"}
fsdp.parameter @encoder.layers.encoder_layer_0.mlp.3.w : tensor<4x2xf32> {module_path = "encoder.layers.encoder_layer_0.mlp.3"}
// expected-remark @+1 {{unit 'encoder.layers.encoder_layer_1': 3 parameters, 20 elements (transformer policy)}}
fsdp.parameter @encoder.layers.encoder_layer_1.ln.w : tensor<4xf32> {module_path = "encoder.layers.encoder_layer_1.ln"}
fsdp.parameter @encoder.layers.encoder_layer_1.mlp.0.w : tensor<2x4xf32> {module_path = "encoder.layers.encoder_layer_1.mlp.0"}
fsdp.parameter @encoder.layers.encoder_layer_1.mlp.3.w : tensor<4x2xf32> {module_path = "encoder.layers.encoder_layer_1.mlp.3"}
// expected-remark @+1 {{unit 'encoder.layers.encoder_layer_2': 3 parameters, 20 elements (transformer policy)}}
fsdp.parameter @encoder.layers.encoder_layer_2.ln.w : tensor<4xf32> {module_path = "encoder.layers.encoder_layer_2.ln"}
fsdp.parameter @encoder.layers.encoder_layer_2.mlp.0.w : tensor<2x4xf32> {module_path = "encoder.layers.encoder_layer_2.mlp.0"}
fsdp.parameter @encoder.layers.encoder_layer_2.mlp.3.w : tensor<4x2xf32> {module_path = "encoder.layers.encoder_layer_2.mlp.3"}
// expected-remark @+1 {{unit 'heads.0': 1 parameters, 8 elements (transformer policy)}}
fsdp.parameter @heads.0.w : tensor<2x4xf32> {module_path = "heads.0"}
// expected-remark @+1 {{unit 'heads.1': 1 parameters, 8 elements (transformer policy)}}
fsdp.parameter @heads.1.w : tensor<2x4xf32> {module_path = "heads.1"}
