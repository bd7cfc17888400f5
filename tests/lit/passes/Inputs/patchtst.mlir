module attributes {fsdp.source = "patchtst.safetensors", fsdp.frontend = "torch.export"} {
  fsdp.parameter @"m.model.encoder.embedder.input_embedding.weight" : tensor<16x8xf32> {module_path = "m.model.encoder.embedder.input_embedding", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "PatchTSTEmbedding", "Linear"]}
  fsdp.parameter @"m.model.encoder.embedder.input_embedding.bias" : tensor<16xf32> {module_path = "m.model.encoder.embedder.input_embedding", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "PatchTSTEmbedding", "Linear"]}
  fsdp.parameter @"m.model.encoder.positional_encoder.position_enc" : tensor<4x16xf32> {module_path = "m.model.encoder.positional_encoder", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "PatchTSTPositionalEncoding"], frozen}
  fsdp.parameter @"m.model.encoder.layers.0.self_attn.k_proj.weight" : tensor<16x16xf32> {module_path = "m.model.encoder.layers.0.self_attn.k_proj", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTAttention", "Linear"]}
  fsdp.parameter @"m.model.encoder.layers.0.self_attn.k_proj.bias" : tensor<16xf32> {module_path = "m.model.encoder.layers.0.self_attn.k_proj", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTAttention", "Linear"]}
  fsdp.parameter @"m.model.encoder.layers.0.self_attn.v_proj.weight" : tensor<16x16xf32> {module_path = "m.model.encoder.layers.0.self_attn.v_proj", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTAttention", "Linear"]}
  fsdp.parameter @"m.model.encoder.layers.0.self_attn.v_proj.bias" : tensor<16xf32> {module_path = "m.model.encoder.layers.0.self_attn.v_proj", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTAttention", "Linear"]}
  fsdp.parameter @"m.model.encoder.layers.0.self_attn.q_proj.weight" : tensor<16x16xf32> {module_path = "m.model.encoder.layers.0.self_attn.q_proj", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTAttention", "Linear"]}
  fsdp.parameter @"m.model.encoder.layers.0.self_attn.q_proj.bias" : tensor<16xf32> {module_path = "m.model.encoder.layers.0.self_attn.q_proj", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTAttention", "Linear"]}
  fsdp.parameter @"m.model.encoder.layers.0.self_attn.out_proj.weight" : tensor<16x16xf32> {module_path = "m.model.encoder.layers.0.self_attn.out_proj", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTAttention", "Linear"]}
  fsdp.parameter @"m.model.encoder.layers.0.self_attn.out_proj.bias" : tensor<16xf32> {module_path = "m.model.encoder.layers.0.self_attn.out_proj", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTAttention", "Linear"]}
  fsdp.parameter @"m.model.encoder.layers.0.norm_sublayer1.batchnorm.weight" : tensor<16xf32> {module_path = "m.model.encoder.layers.0.norm_sublayer1.batchnorm", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTBatchNorm", "BatchNorm1d"]}
  fsdp.parameter @"m.model.encoder.layers.0.norm_sublayer1.batchnorm.bias" : tensor<16xf32> {module_path = "m.model.encoder.layers.0.norm_sublayer1.batchnorm", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTBatchNorm", "BatchNorm1d"]}
  fsdp.parameter @"m.model.encoder.layers.0.norm_sublayer1.batchnorm.running_mean" : tensor<16xf32> {module_path = "m.model.encoder.layers.0.norm_sublayer1.batchnorm", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTBatchNorm", "BatchNorm1d"], buffer}
  fsdp.parameter @"m.model.encoder.layers.0.norm_sublayer1.batchnorm.running_var" : tensor<16xf32> {module_path = "m.model.encoder.layers.0.norm_sublayer1.batchnorm", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTBatchNorm", "BatchNorm1d"], buffer}
  fsdp.parameter @"m.model.encoder.layers.0.ff.0.weight" : tensor<32x16xf32> {module_path = "m.model.encoder.layers.0.ff.0", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "Sequential", "Linear"]}
  fsdp.parameter @"m.model.encoder.layers.0.ff.0.bias" : tensor<32xf32> {module_path = "m.model.encoder.layers.0.ff.0", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "Sequential", "Linear"]}
  fsdp.parameter @"m.model.encoder.layers.0.ff.3.weight" : tensor<16x32xf32> {module_path = "m.model.encoder.layers.0.ff.3", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "Sequential", "Linear"]}
  fsdp.parameter @"m.model.encoder.layers.0.ff.3.bias" : tensor<16xf32> {module_path = "m.model.encoder.layers.0.ff.3", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "Sequential", "Linear"]}
  fsdp.parameter @"m.model.encoder.layers.0.norm_sublayer3.batchnorm.weight" : tensor<16xf32> {module_path = "m.model.encoder.layers.0.norm_sublayer3.batchnorm", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTBatchNorm", "BatchNorm1d"]}
  fsdp.parameter @"m.model.encoder.layers.0.norm_sublayer3.batchnorm.bias" : tensor<16xf32> {module_path = "m.model.encoder.layers.0.norm_sublayer3.batchnorm", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTBatchNorm", "BatchNorm1d"]}
  fsdp.parameter @"m.model.encoder.layers.0.norm_sublayer3.batchnorm.running_mean" : tensor<16xf32> {module_path = "m.model.encoder.layers.0.norm_sublayer3.batchnorm", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTBatchNorm", "BatchNorm1d"], buffer}
  fsdp.parameter @"m.model.encoder.layers.0.norm_sublayer3.batchnorm.running_var" : tensor<16xf32> {module_path = "m.model.encoder.layers.0.norm_sublayer3.batchnorm", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTBatchNorm", "BatchNorm1d"], buffer}
  fsdp.parameter @"m.model.encoder.layers.1.self_attn.k_proj.weight" : tensor<16x16xf32> {module_path = "m.model.encoder.layers.1.self_attn.k_proj", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTAttention", "Linear"]}
  fsdp.parameter @"m.model.encoder.layers.1.self_attn.k_proj.bias" : tensor<16xf32> {module_path = "m.model.encoder.layers.1.self_attn.k_proj", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTAttention", "Linear"]}
  fsdp.parameter @"m.model.encoder.layers.1.self_attn.v_proj.weight" : tensor<16x16xf32> {module_path = "m.model.encoder.layers.1.self_attn.v_proj", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTAttention", "Linear"]}
  fsdp.parameter @"m.model.encoder.layers.1.self_attn.v_proj.bias" : tensor<16xf32> {module_path = "m.model.encoder.layers.1.self_attn.v_proj", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTAttention", "Linear"]}
  fsdp.parameter @"m.model.encoder.layers.1.self_attn.q_proj.weight" : tensor<16x16xf32> {module_path = "m.model.encoder.layers.1.self_attn.q_proj", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTAttention", "Linear"]}
  fsdp.parameter @"m.model.encoder.layers.1.self_attn.q_proj.bias" : tensor<16xf32> {module_path = "m.model.encoder.layers.1.self_attn.q_proj", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTAttention", "Linear"]}
  fsdp.parameter @"m.model.encoder.layers.1.self_attn.out_proj.weight" : tensor<16x16xf32> {module_path = "m.model.encoder.layers.1.self_attn.out_proj", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTAttention", "Linear"]}
  fsdp.parameter @"m.model.encoder.layers.1.self_attn.out_proj.bias" : tensor<16xf32> {module_path = "m.model.encoder.layers.1.self_attn.out_proj", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTAttention", "Linear"]}
  fsdp.parameter @"m.model.encoder.layers.1.norm_sublayer1.batchnorm.weight" : tensor<16xf32> {module_path = "m.model.encoder.layers.1.norm_sublayer1.batchnorm", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTBatchNorm", "BatchNorm1d"]}
  fsdp.parameter @"m.model.encoder.layers.1.norm_sublayer1.batchnorm.bias" : tensor<16xf32> {module_path = "m.model.encoder.layers.1.norm_sublayer1.batchnorm", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTBatchNorm", "BatchNorm1d"]}
  fsdp.parameter @"m.model.encoder.layers.1.norm_sublayer1.batchnorm.running_mean" : tensor<16xf32> {module_path = "m.model.encoder.layers.1.norm_sublayer1.batchnorm", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTBatchNorm", "BatchNorm1d"], buffer}
  fsdp.parameter @"m.model.encoder.layers.1.norm_sublayer1.batchnorm.running_var" : tensor<16xf32> {module_path = "m.model.encoder.layers.1.norm_sublayer1.batchnorm", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTBatchNorm", "BatchNorm1d"], buffer}
  fsdp.parameter @"m.model.encoder.layers.1.ff.0.weight" : tensor<32x16xf32> {module_path = "m.model.encoder.layers.1.ff.0", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "Sequential", "Linear"]}
  fsdp.parameter @"m.model.encoder.layers.1.ff.0.bias" : tensor<32xf32> {module_path = "m.model.encoder.layers.1.ff.0", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "Sequential", "Linear"]}
  fsdp.parameter @"m.model.encoder.layers.1.ff.3.weight" : tensor<16x32xf32> {module_path = "m.model.encoder.layers.1.ff.3", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "Sequential", "Linear"]}
  fsdp.parameter @"m.model.encoder.layers.1.ff.3.bias" : tensor<16xf32> {module_path = "m.model.encoder.layers.1.ff.3", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "Sequential", "Linear"]}
  fsdp.parameter @"m.model.encoder.layers.1.norm_sublayer3.batchnorm.weight" : tensor<16xf32> {module_path = "m.model.encoder.layers.1.norm_sublayer3.batchnorm", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTBatchNorm", "BatchNorm1d"]}
  fsdp.parameter @"m.model.encoder.layers.1.norm_sublayer3.batchnorm.bias" : tensor<16xf32> {module_path = "m.model.encoder.layers.1.norm_sublayer3.batchnorm", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTBatchNorm", "BatchNorm1d"]}
  fsdp.parameter @"m.model.encoder.layers.1.norm_sublayer3.batchnorm.running_mean" : tensor<16xf32> {module_path = "m.model.encoder.layers.1.norm_sublayer3.batchnorm", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTBatchNorm", "BatchNorm1d"], buffer}
  fsdp.parameter @"m.model.encoder.layers.1.norm_sublayer3.batchnorm.running_var" : tensor<16xf32> {module_path = "m.model.encoder.layers.1.norm_sublayer3.batchnorm", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTModel", "PatchTSTEncoder", "ModuleList", "PatchTSTEncoderLayer", "PatchTSTBatchNorm", "BatchNorm1d"], buffer}
  fsdp.parameter @"m.head.projection.weight" : tensor<8x16xf32> {module_path = "m.head.projection", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTPredictionHead", "Linear"]}
  fsdp.parameter @"m.head.projection.bias" : tensor<8xf32> {module_path = "m.head.projection", module_classes = ["W", "PatchTSTForPrediction", "PatchTSTPredictionHead", "Linear"]}
  func.func @forward(%arg0: tensor<2x32x3xf32> {fsdp.name = "past_values"}) -> (tensor<2x8x3xf32> {fsdp.name = "output"}) {
    %0 = "fsdp.constant"() <{value = dense<"0x0000803F"> : tensor<2x32x3xf32>}> : () -> tensor<2x32x3xf32>
    %1 = "fsdp.reduce_sum"(%0) <{axes = array<i64: 1>, keepdims = true}> : (tensor<2x32x3xf32>) -> tensor<2x1x3xf32> loc("m.model.scaler.scaler")
    %2 = "fsdp.constant"() <{value = dense<"0x0000803F"> : tensor<f32>}> : () -> tensor<f32>
    %3 = "fsdp.max"(%1, %2) : (tensor<2x1x3xf32>, tensor<f32>) -> tensor<2x1x3xf32> loc("m.model.scaler.scaler")
    %4 = "fsdp.mul"(%arg0, %0) : (tensor<2x32x3xf32>, tensor<2x32x3xf32>) -> tensor<2x32x3xf32> loc("m.model.scaler.scaler")
    %5 = "fsdp.reduce_sum"(%4) <{axes = array<i64: 1>, keepdims = true}> : (tensor<2x32x3xf32>) -> tensor<2x1x3xf32> loc("m.model.scaler.scaler")
    %6 = "fsdp.div"(%5, %3) : (tensor<2x1x3xf32>, tensor<2x1x3xf32>) -> tensor<2x1x3xf32> loc("m.model.scaler.scaler")
    %7 = "fsdp.sub"(%arg0, %6) : (tensor<2x32x3xf32>, tensor<2x1x3xf32>) -> tensor<2x32x3xf32> loc("m.model.scaler.scaler")
    %8 = "fsdp.mul"(%7, %0) : (tensor<2x32x3xf32>, tensor<2x32x3xf32>) -> tensor<2x32x3xf32> loc("m.model.scaler.scaler")
    %9 = "fsdp.constant"() <{value = dense<"0x00000040"> : tensor<f32>}> : () -> tensor<f32>
    %10 = "fsdp.pow"(%8, %9) : (tensor<2x32x3xf32>, tensor<f32>) -> tensor<2x32x3xf32> loc("m.model.scaler.scaler")
    %11 = "fsdp.reduce_sum"(%10) <{axes = array<i64: 1>, keepdims = true}> : (tensor<2x32x3xf32>) -> tensor<2x1x3xf32> loc("m.model.scaler.scaler")
    %12 = "fsdp.div"(%11, %3) : (tensor<2x1x3xf32>, tensor<2x1x3xf32>) -> tensor<2x1x3xf32> loc("m.model.scaler.scaler")
    %13 = "fsdp.constant"() <{value = dense<"0xACC52737"> : tensor<f32>}> : () -> tensor<f32>
    %14 = "fsdp.add"(%12, %13) : (tensor<2x1x3xf32>, tensor<f32>) -> tensor<2x1x3xf32> loc("m.model.scaler.scaler")
    %15 = "fsdp.sqrt"(%14) : (tensor<2x1x3xf32>) -> tensor<2x1x3xf32> loc("m.model.scaler.scaler")
    %16 = "fsdp.sub"(%arg0, %6) : (tensor<2x32x3xf32>, tensor<2x1x3xf32>) -> tensor<2x32x3xf32> loc("m.model.scaler.scaler")
    %17 = "fsdp.div"(%16, %15) : (tensor<2x32x3xf32>, tensor<2x1x3xf32>) -> tensor<2x32x3xf32> loc("m.model.scaler.scaler")
    %18 = "fsdp.constant"() <{value = dense<"0x00000000000000000100000000000000020000000000000003000000000000000400000000000000050000000000000006000000000000000700000000000000080000000000000009000000000000000A000000000000000B000000000000000C000000000000000D000000000000000E000000000000000F0000000000000010000000000000001100000000000000120000000000000013000000000000001400000000000000150000000000000016000000000000001700000000000000180000000000000019000000000000001A000000000000001B000000000000001C000000000000001D000000000000001E000000000000001F00000000000000"> : tensor<4x8xi64>}> : () -> tensor<4x8xi64>
    %19 = "fsdp.gather"(%17, %18) <{axis = 1 : i64}> : (tensor<2x32x3xf32>, tensor<4x8xi64>) -> tensor<2x4x8x3xf32> loc("m.model.patchifier")
    %20 = "fsdp.transpose"(%19) <{perm = array<i64: 0, 1, 3, 2>}> : (tensor<2x4x8x3xf32>) -> tensor<2x4x3x8xf32> loc("m.model.patchifier")
    %21 = "fsdp.transpose"(%20) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<2x4x3x8xf32>) -> tensor<2x3x4x8xf32> loc("m.model.patchifier")
    %22 = "fsdp.get_parameter"() <{param = @"m.model.encoder.embedder.input_embedding.weight"}> : () -> tensor<16x8xf32>
    %23 = "fsdp.transpose"(%22) <{perm = array<i64: 1, 0>}> : (tensor<16x8xf32>) -> tensor<8x16xf32> loc("m.model.encoder.embedder.input_embedding")
    %24 = "fsdp.get_parameter"() <{param = @"m.model.encoder.embedder.input_embedding.bias"}> : () -> tensor<16xf32>
    %25 = "fsdp.matmul"(%21, %23, %24) : (tensor<2x3x4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<2x3x4x16xf32> loc("m.model.encoder.embedder.input_embedding")
    %26 = "fsdp.get_parameter"() <{param = @"m.model.encoder.positional_encoder.position_enc"}> : () -> tensor<4x16xf32>
    %27 = "fsdp.add"(%25, %26) : (tensor<2x3x4x16xf32>, tensor<4x16xf32>) -> tensor<2x3x4x16xf32> loc("m.model.encoder.positional_encoder")
    %28 = "fsdp.reshape"(%27) : (tensor<2x3x4x16xf32>) -> tensor<6x4x16xf32> loc("m.model.encoder.layers.0")
    %29 = "fsdp.transpose"(%28) <{perm = array<i64: 0, 2, 1>}> : (tensor<6x4x16xf32>) -> tensor<6x16x4xf32> loc("m.model.encoder.layers.0.norm_sublayer1")
    %30 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.0.norm_sublayer1.batchnorm.weight"}> : () -> tensor<16xf32>
    %31 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.0.norm_sublayer1.batchnorm.bias"}> : () -> tensor<16xf32>
    %32:3 = "fsdp.batch_norm"(%29, %30, %31) <{epsilon = 1.000000000e-05 : f32}> : (tensor<6x16x4xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<6x16x4xf32>, tensor<16xf32>, tensor<16xf32>) loc("m.model.encoder.layers.0.norm_sublayer1.batchnorm")
    %33 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.0.norm_sublayer1.batchnorm.running_mean"}> : () -> tensor<16xf32>
    %34 = "fsdp.constant"() <{value = dense<"0x6666663F"> : tensor<f32>}> : () -> tensor<f32>
    %35 = "fsdp.mul"(%33, %34) : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32> loc("m.model.encoder.layers.0.norm_sublayer1.batchnorm")
    %36 = "fsdp.constant"() <{value = dense<"0xCDCCCC3D"> : tensor<f32>}> : () -> tensor<f32>
    %37 = "fsdp.mul"(%32#1, %36) : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32> loc("m.model.encoder.layers.0.norm_sublayer1.batchnorm")
    %38 = "fsdp.add"(%35, %37) : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32> loc("m.model.encoder.layers.0.norm_sublayer1.batchnorm")
    "fsdp.assign_buffer"(%38) <{param = @"m.model.encoder.layers.0.norm_sublayer1.batchnorm.running_mean"}> : (tensor<16xf32>) -> ()
    %40 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.0.norm_sublayer1.batchnorm.running_var"}> : () -> tensor<16xf32>
    %41 = "fsdp.constant"() <{value = dense<"0x6666663F"> : tensor<f32>}> : () -> tensor<f32>
    %42 = "fsdp.mul"(%40, %41) : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32> loc("m.model.encoder.layers.0.norm_sublayer1.batchnorm")
    %43 = "fsdp.constant"() <{value = dense<"0xCDCCCC3D"> : tensor<f32>}> : () -> tensor<f32>
    %44 = "fsdp.mul"(%32#2, %43) : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32> loc("m.model.encoder.layers.0.norm_sublayer1.batchnorm")
    %45 = "fsdp.add"(%42, %44) : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32> loc("m.model.encoder.layers.0.norm_sublayer1.batchnorm")
    "fsdp.assign_buffer"(%45) <{param = @"m.model.encoder.layers.0.norm_sublayer1.batchnorm.running_var"}> : (tensor<16xf32>) -> ()
    %47 = "fsdp.transpose"(%32#0) <{perm = array<i64: 0, 2, 1>}> : (tensor<6x16x4xf32>) -> tensor<6x4x16xf32> loc("m.model.encoder.layers.0.norm_sublayer1")
    %48 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.0.self_attn.q_proj.weight"}> : () -> tensor<16x16xf32>
    %49 = "fsdp.transpose"(%48) <{perm = array<i64: 1, 0>}> : (tensor<16x16xf32>) -> tensor<16x16xf32> loc("m.model.encoder.layers.0.self_attn.q_proj")
    %50 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.0.self_attn.q_proj.bias"}> : () -> tensor<16xf32>
    %51 = "fsdp.matmul"(%47, %49, %50) : (tensor<6x4x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<6x4x16xf32> loc("m.model.encoder.layers.0.self_attn.q_proj")
    %52 = "fsdp.reshape"(%51) : (tensor<6x4x16xf32>) -> tensor<6x4x2x8xf32> loc("m.model.encoder.layers.0.self_attn")
    %53 = "fsdp.transpose"(%52) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<6x4x2x8xf32>) -> tensor<6x2x4x8xf32> loc("m.model.encoder.layers.0.self_attn")
    %54 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.0.self_attn.k_proj.weight"}> : () -> tensor<16x16xf32>
    %55 = "fsdp.transpose"(%54) <{perm = array<i64: 1, 0>}> : (tensor<16x16xf32>) -> tensor<16x16xf32> loc("m.model.encoder.layers.0.self_attn.k_proj")
    %56 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.0.self_attn.k_proj.bias"}> : () -> tensor<16xf32>
    %57 = "fsdp.matmul"(%47, %55, %56) : (tensor<6x4x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<6x4x16xf32> loc("m.model.encoder.layers.0.self_attn.k_proj")
    %58 = "fsdp.reshape"(%57) : (tensor<6x4x16xf32>) -> tensor<6x4x2x8xf32> loc("m.model.encoder.layers.0.self_attn")
    %59 = "fsdp.transpose"(%58) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<6x4x2x8xf32>) -> tensor<6x2x4x8xf32> loc("m.model.encoder.layers.0.self_attn")
    %60 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.0.self_attn.v_proj.weight"}> : () -> tensor<16x16xf32>
    %61 = "fsdp.transpose"(%60) <{perm = array<i64: 1, 0>}> : (tensor<16x16xf32>) -> tensor<16x16xf32> loc("m.model.encoder.layers.0.self_attn.v_proj")
    %62 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.0.self_attn.v_proj.bias"}> : () -> tensor<16xf32>
    %63 = "fsdp.matmul"(%47, %61, %62) : (tensor<6x4x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<6x4x16xf32> loc("m.model.encoder.layers.0.self_attn.v_proj")
    %64 = "fsdp.reshape"(%63) : (tensor<6x4x16xf32>) -> tensor<6x4x2x8xf32> loc("m.model.encoder.layers.0.self_attn")
    %65 = "fsdp.transpose"(%64) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<6x4x2x8xf32>) -> tensor<6x2x4x8xf32> loc("m.model.encoder.layers.0.self_attn")
    %66 = "fsdp.transpose"(%59) <{perm = array<i64: 0, 1, 3, 2>}> : (tensor<6x2x4x8xf32>) -> tensor<6x2x8x4xf32> loc("m.model.encoder.layers.0.self_attn")
    %67 = "fsdp.matmul"(%53, %66) : (tensor<6x2x4x8xf32>, tensor<6x2x8x4xf32>) -> tensor<6x2x4x4xf32> loc("m.model.encoder.layers.0.self_attn")
    %68 = "fsdp.constant"() <{value = dense<"0xF304B53E"> : tensor<f32>}> : () -> tensor<f32>
    %69 = "fsdp.mul"(%67, %68) : (tensor<6x2x4x4xf32>, tensor<f32>) -> tensor<6x2x4x4xf32> loc("m.model.encoder.layers.0.self_attn")
    %70 = "fsdp.softmax"(%69) <{axis = 3 : i64}> : (tensor<6x2x4x4xf32>) -> tensor<6x2x4x4xf32> loc("m.model.encoder.layers.0.self_attn")
    %71 = "fsdp.matmul"(%70, %65) : (tensor<6x2x4x4xf32>, tensor<6x2x4x8xf32>) -> tensor<6x2x4x8xf32> loc("m.model.encoder.layers.0.self_attn")
    %72 = "fsdp.transpose"(%71) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<6x2x4x8xf32>) -> tensor<6x4x2x8xf32> loc("m.model.encoder.layers.0.self_attn")
    %73 = "fsdp.reshape"(%72) : (tensor<6x4x2x8xf32>) -> tensor<6x4x16xf32> loc("m.model.encoder.layers.0.self_attn")
    %74 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.0.self_attn.out_proj.weight"}> : () -> tensor<16x16xf32>
    %75 = "fsdp.transpose"(%74) <{perm = array<i64: 1, 0>}> : (tensor<16x16xf32>) -> tensor<16x16xf32> loc("m.model.encoder.layers.0.self_attn.out_proj")
    %76 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.0.self_attn.out_proj.bias"}> : () -> tensor<16xf32>
    %77 = "fsdp.matmul"(%73, %75, %76) : (tensor<6x4x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<6x4x16xf32> loc("m.model.encoder.layers.0.self_attn.out_proj")
    %78 = "fsdp.add"(%28, %77) : (tensor<6x4x16xf32>, tensor<6x4x16xf32>) -> tensor<6x4x16xf32> loc("m.model.encoder.layers.0")
    %79 = "fsdp.reshape"(%78) : (tensor<6x4x16xf32>) -> tensor<2x3x4x16xf32> loc("m.model.encoder.layers.0")
    %80 = "fsdp.reshape"(%79) : (tensor<2x3x4x16xf32>) -> tensor<6x4x16xf32> loc("m.model.encoder.layers.0")
    %81 = "fsdp.transpose"(%80) <{perm = array<i64: 0, 2, 1>}> : (tensor<6x4x16xf32>) -> tensor<6x16x4xf32> loc("m.model.encoder.layers.0.norm_sublayer3")
    %82 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.0.norm_sublayer3.batchnorm.weight"}> : () -> tensor<16xf32>
    %83 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.0.norm_sublayer3.batchnorm.bias"}> : () -> tensor<16xf32>
    %84:3 = "fsdp.batch_norm"(%81, %82, %83) <{epsilon = 1.000000000e-05 : f32}> : (tensor<6x16x4xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<6x16x4xf32>, tensor<16xf32>, tensor<16xf32>) loc("m.model.encoder.layers.0.norm_sublayer3.batchnorm")
    %85 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.0.norm_sublayer3.batchnorm.running_mean"}> : () -> tensor<16xf32>
    %86 = "fsdp.constant"() <{value = dense<"0x6666663F"> : tensor<f32>}> : () -> tensor<f32>
    %87 = "fsdp.mul"(%85, %86) : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32> loc("m.model.encoder.layers.0.norm_sublayer3.batchnorm")
    %88 = "fsdp.constant"() <{value = dense<"0xCDCCCC3D"> : tensor<f32>}> : () -> tensor<f32>
    %89 = "fsdp.mul"(%84#1, %88) : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32> loc("m.model.encoder.layers.0.norm_sublayer3.batchnorm")
    %90 = "fsdp.add"(%87, %89) : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32> loc("m.model.encoder.layers.0.norm_sublayer3.batchnorm")
    "fsdp.assign_buffer"(%90) <{param = @"m.model.encoder.layers.0.norm_sublayer3.batchnorm.running_mean"}> : (tensor<16xf32>) -> ()
    %92 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.0.norm_sublayer3.batchnorm.running_var"}> : () -> tensor<16xf32>
    %93 = "fsdp.constant"() <{value = dense<"0x6666663F"> : tensor<f32>}> : () -> tensor<f32>
    %94 = "fsdp.mul"(%92, %93) : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32> loc("m.model.encoder.layers.0.norm_sublayer3.batchnorm")
    %95 = "fsdp.constant"() <{value = dense<"0xCDCCCC3D"> : tensor<f32>}> : () -> tensor<f32>
    %96 = "fsdp.mul"(%84#2, %95) : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32> loc("m.model.encoder.layers.0.norm_sublayer3.batchnorm")
    %97 = "fsdp.add"(%94, %96) : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32> loc("m.model.encoder.layers.0.norm_sublayer3.batchnorm")
    "fsdp.assign_buffer"(%97) <{param = @"m.model.encoder.layers.0.norm_sublayer3.batchnorm.running_var"}> : (tensor<16xf32>) -> ()
    %99 = "fsdp.transpose"(%84#0) <{perm = array<i64: 0, 2, 1>}> : (tensor<6x16x4xf32>) -> tensor<6x4x16xf32> loc("m.model.encoder.layers.0.norm_sublayer3")
    %100 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.0.ff.0.weight"}> : () -> tensor<32x16xf32>
    %101 = "fsdp.transpose"(%100) <{perm = array<i64: 1, 0>}> : (tensor<32x16xf32>) -> tensor<16x32xf32> loc("m.model.encoder.layers.0.ff.0")
    %102 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.0.ff.0.bias"}> : () -> tensor<32xf32>
    %103 = "fsdp.matmul"(%99, %101, %102) : (tensor<6x4x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<6x4x32xf32> loc("m.model.encoder.layers.0.ff.0")
    %104 = "fsdp.gelu"(%103) <{approximate = "none"}> : (tensor<6x4x32xf32>) -> tensor<6x4x32xf32> loc("m.model.encoder.layers.0.ff.1")
    %105 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.0.ff.3.weight"}> : () -> tensor<16x32xf32>
    %106 = "fsdp.transpose"(%105) <{perm = array<i64: 1, 0>}> : (tensor<16x32xf32>) -> tensor<32x16xf32> loc("m.model.encoder.layers.0.ff.3")
    %107 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.0.ff.3.bias"}> : () -> tensor<16xf32>
    %108 = "fsdp.matmul"(%104, %106, %107) : (tensor<6x4x32xf32>, tensor<32x16xf32>, tensor<16xf32>) -> tensor<6x4x16xf32> loc("m.model.encoder.layers.0.ff.3")
    %109 = "fsdp.add"(%80, %108) : (tensor<6x4x16xf32>, tensor<6x4x16xf32>) -> tensor<6x4x16xf32> loc("m.model.encoder.layers.0")
    %110 = "fsdp.reshape"(%109) : (tensor<6x4x16xf32>) -> tensor<2x3x4x16xf32> loc("m.model.encoder.layers.0")
    %111 = "fsdp.reshape"(%110) : (tensor<2x3x4x16xf32>) -> tensor<6x4x16xf32> loc("m.model.encoder.layers.1")
    %112 = "fsdp.transpose"(%111) <{perm = array<i64: 0, 2, 1>}> : (tensor<6x4x16xf32>) -> tensor<6x16x4xf32> loc("m.model.encoder.layers.1.norm_sublayer1")
    %113 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.1.norm_sublayer1.batchnorm.weight"}> : () -> tensor<16xf32>
    %114 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.1.norm_sublayer1.batchnorm.bias"}> : () -> tensor<16xf32>
    %115:3 = "fsdp.batch_norm"(%112, %113, %114) <{epsilon = 1.000000000e-05 : f32}> : (tensor<6x16x4xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<6x16x4xf32>, tensor<16xf32>, tensor<16xf32>) loc("m.model.encoder.layers.1.norm_sublayer1.batchnorm")
    %116 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.1.norm_sublayer1.batchnorm.running_mean"}> : () -> tensor<16xf32>
    %117 = "fsdp.constant"() <{value = dense<"0x6666663F"> : tensor<f32>}> : () -> tensor<f32>
    %118 = "fsdp.mul"(%116, %117) : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32> loc("m.model.encoder.layers.1.norm_sublayer1.batchnorm")
    %119 = "fsdp.constant"() <{value = dense<"0xCDCCCC3D"> : tensor<f32>}> : () -> tensor<f32>
    %120 = "fsdp.mul"(%115#1, %119) : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32> loc("m.model.encoder.layers.1.norm_sublayer1.batchnorm")
    %121 = "fsdp.add"(%118, %120) : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32> loc("m.model.encoder.layers.1.norm_sublayer1.batchnorm")
    "fsdp.assign_buffer"(%121) <{param = @"m.model.encoder.layers.1.norm_sublayer1.batchnorm.running_mean"}> : (tensor<16xf32>) -> ()
    %123 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.1.norm_sublayer1.batchnorm.running_var"}> : () -> tensor<16xf32>
    %124 = "fsdp.constant"() <{value = dense<"0x6666663F"> : tensor<f32>}> : () -> tensor<f32>
    %125 = "fsdp.mul"(%123, %124) : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32> loc("m.model.encoder.layers.1.norm_sublayer1.batchnorm")
    %126 = "fsdp.constant"() <{value = dense<"0xCDCCCC3D"> : tensor<f32>}> : () -> tensor<f32>
    %127 = "fsdp.mul"(%115#2, %126) : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32> loc("m.model.encoder.layers.1.norm_sublayer1.batchnorm")
    %128 = "fsdp.add"(%125, %127) : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32> loc("m.model.encoder.layers.1.norm_sublayer1.batchnorm")
    "fsdp.assign_buffer"(%128) <{param = @"m.model.encoder.layers.1.norm_sublayer1.batchnorm.running_var"}> : (tensor<16xf32>) -> ()
    %130 = "fsdp.transpose"(%115#0) <{perm = array<i64: 0, 2, 1>}> : (tensor<6x16x4xf32>) -> tensor<6x4x16xf32> loc("m.model.encoder.layers.1.norm_sublayer1")
    %131 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.1.self_attn.q_proj.weight"}> : () -> tensor<16x16xf32>
    %132 = "fsdp.transpose"(%131) <{perm = array<i64: 1, 0>}> : (tensor<16x16xf32>) -> tensor<16x16xf32> loc("m.model.encoder.layers.1.self_attn.q_proj")
    %133 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.1.self_attn.q_proj.bias"}> : () -> tensor<16xf32>
    %134 = "fsdp.matmul"(%130, %132, %133) : (tensor<6x4x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<6x4x16xf32> loc("m.model.encoder.layers.1.self_attn.q_proj")
    %135 = "fsdp.reshape"(%134) : (tensor<6x4x16xf32>) -> tensor<6x4x2x8xf32> loc("m.model.encoder.layers.1.self_attn")
    %136 = "fsdp.transpose"(%135) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<6x4x2x8xf32>) -> tensor<6x2x4x8xf32> loc("m.model.encoder.layers.1.self_attn")
    %137 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.1.self_attn.k_proj.weight"}> : () -> tensor<16x16xf32>
    %138 = "fsdp.transpose"(%137) <{perm = array<i64: 1, 0>}> : (tensor<16x16xf32>) -> tensor<16x16xf32> loc("m.model.encoder.layers.1.self_attn.k_proj")
    %139 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.1.self_attn.k_proj.bias"}> : () -> tensor<16xf32>
    %140 = "fsdp.matmul"(%130, %138, %139) : (tensor<6x4x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<6x4x16xf32> loc("m.model.encoder.layers.1.self_attn.k_proj")
    %141 = "fsdp.reshape"(%140) : (tensor<6x4x16xf32>) -> tensor<6x4x2x8xf32> loc("m.model.encoder.layers.1.self_attn")
    %142 = "fsdp.transpose"(%141) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<6x4x2x8xf32>) -> tensor<6x2x4x8xf32> loc("m.model.encoder.layers.1.self_attn")
    %143 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.1.self_attn.v_proj.weight"}> : () -> tensor<16x16xf32>
    %144 = "fsdp.transpose"(%143) <{perm = array<i64: 1, 0>}> : (tensor<16x16xf32>) -> tensor<16x16xf32> loc("m.model.encoder.layers.1.self_attn.v_proj")
    %145 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.1.self_attn.v_proj.bias"}> : () -> tensor<16xf32>
    %146 = "fsdp.matmul"(%130, %144, %145) : (tensor<6x4x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<6x4x16xf32> loc("m.model.encoder.layers.1.self_attn.v_proj")
    %147 = "fsdp.reshape"(%146) : (tensor<6x4x16xf32>) -> tensor<6x4x2x8xf32> loc("m.model.encoder.layers.1.self_attn")
    %148 = "fsdp.transpose"(%147) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<6x4x2x8xf32>) -> tensor<6x2x4x8xf32> loc("m.model.encoder.layers.1.self_attn")
    %149 = "fsdp.transpose"(%142) <{perm = array<i64: 0, 1, 3, 2>}> : (tensor<6x2x4x8xf32>) -> tensor<6x2x8x4xf32> loc("m.model.encoder.layers.1.self_attn")
    %150 = "fsdp.matmul"(%136, %149) : (tensor<6x2x4x8xf32>, tensor<6x2x8x4xf32>) -> tensor<6x2x4x4xf32> loc("m.model.encoder.layers.1.self_attn")
    %151 = "fsdp.constant"() <{value = dense<"0xF304B53E"> : tensor<f32>}> : () -> tensor<f32>
    %152 = "fsdp.mul"(%150, %151) : (tensor<6x2x4x4xf32>, tensor<f32>) -> tensor<6x2x4x4xf32> loc("m.model.encoder.layers.1.self_attn")
    %153 = "fsdp.softmax"(%152) <{axis = 3 : i64}> : (tensor<6x2x4x4xf32>) -> tensor<6x2x4x4xf32> loc("m.model.encoder.layers.1.self_attn")
    %154 = "fsdp.matmul"(%153, %148) : (tensor<6x2x4x4xf32>, tensor<6x2x4x8xf32>) -> tensor<6x2x4x8xf32> loc("m.model.encoder.layers.1.self_attn")
    %155 = "fsdp.transpose"(%154) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<6x2x4x8xf32>) -> tensor<6x4x2x8xf32> loc("m.model.encoder.layers.1.self_attn")
    %156 = "fsdp.reshape"(%155) : (tensor<6x4x2x8xf32>) -> tensor<6x4x16xf32> loc("m.model.encoder.layers.1.self_attn")
    %157 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.1.self_attn.out_proj.weight"}> : () -> tensor<16x16xf32>
    %158 = "fsdp.transpose"(%157) <{perm = array<i64: 1, 0>}> : (tensor<16x16xf32>) -> tensor<16x16xf32> loc("m.model.encoder.layers.1.self_attn.out_proj")
    %159 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.1.self_attn.out_proj.bias"}> : () -> tensor<16xf32>
    %160 = "fsdp.matmul"(%156, %158, %159) : (tensor<6x4x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<6x4x16xf32> loc("m.model.encoder.layers.1.self_attn.out_proj")
    %161 = "fsdp.add"(%111, %160) : (tensor<6x4x16xf32>, tensor<6x4x16xf32>) -> tensor<6x4x16xf32> loc("m.model.encoder.layers.1")
    %162 = "fsdp.reshape"(%161) : (tensor<6x4x16xf32>) -> tensor<2x3x4x16xf32> loc("m.model.encoder.layers.1")
    %163 = "fsdp.reshape"(%162) : (tensor<2x3x4x16xf32>) -> tensor<6x4x16xf32> loc("m.model.encoder.layers.1")
    %164 = "fsdp.transpose"(%163) <{perm = array<i64: 0, 2, 1>}> : (tensor<6x4x16xf32>) -> tensor<6x16x4xf32> loc("m.model.encoder.layers.1.norm_sublayer3")
    %165 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.1.norm_sublayer3.batchnorm.weight"}> : () -> tensor<16xf32>
    %166 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.1.norm_sublayer3.batchnorm.bias"}> : () -> tensor<16xf32>
    %167:3 = "fsdp.batch_norm"(%164, %165, %166) <{epsilon = 1.000000000e-05 : f32}> : (tensor<6x16x4xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<6x16x4xf32>, tensor<16xf32>, tensor<16xf32>) loc("m.model.encoder.layers.1.norm_sublayer3.batchnorm")
    %168 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.1.norm_sublayer3.batchnorm.running_mean"}> : () -> tensor<16xf32>
    %169 = "fsdp.constant"() <{value = dense<"0x6666663F"> : tensor<f32>}> : () -> tensor<f32>
    %170 = "fsdp.mul"(%168, %169) : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32> loc("m.model.encoder.layers.1.norm_sublayer3.batchnorm")
    %171 = "fsdp.constant"() <{value = dense<"0xCDCCCC3D"> : tensor<f32>}> : () -> tensor<f32>
    %172 = "fsdp.mul"(%167#1, %171) : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32> loc("m.model.encoder.layers.1.norm_sublayer3.batchnorm")
    %173 = "fsdp.add"(%170, %172) : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32> loc("m.model.encoder.layers.1.norm_sublayer3.batchnorm")
    "fsdp.assign_buffer"(%173) <{param = @"m.model.encoder.layers.1.norm_sublayer3.batchnorm.running_mean"}> : (tensor<16xf32>) -> ()
    %175 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.1.norm_sublayer3.batchnorm.running_var"}> : () -> tensor<16xf32>
    %176 = "fsdp.constant"() <{value = dense<"0x6666663F"> : tensor<f32>}> : () -> tensor<f32>
    %177 = "fsdp.mul"(%175, %176) : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32> loc("m.model.encoder.layers.1.norm_sublayer3.batchnorm")
    %178 = "fsdp.constant"() <{value = dense<"0xCDCCCC3D"> : tensor<f32>}> : () -> tensor<f32>
    %179 = "fsdp.mul"(%167#2, %178) : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32> loc("m.model.encoder.layers.1.norm_sublayer3.batchnorm")
    %180 = "fsdp.add"(%177, %179) : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32> loc("m.model.encoder.layers.1.norm_sublayer3.batchnorm")
    "fsdp.assign_buffer"(%180) <{param = @"m.model.encoder.layers.1.norm_sublayer3.batchnorm.running_var"}> : (tensor<16xf32>) -> ()
    %182 = "fsdp.transpose"(%167#0) <{perm = array<i64: 0, 2, 1>}> : (tensor<6x16x4xf32>) -> tensor<6x4x16xf32> loc("m.model.encoder.layers.1.norm_sublayer3")
    %183 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.1.ff.0.weight"}> : () -> tensor<32x16xf32>
    %184 = "fsdp.transpose"(%183) <{perm = array<i64: 1, 0>}> : (tensor<32x16xf32>) -> tensor<16x32xf32> loc("m.model.encoder.layers.1.ff.0")
    %185 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.1.ff.0.bias"}> : () -> tensor<32xf32>
    %186 = "fsdp.matmul"(%182, %184, %185) : (tensor<6x4x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<6x4x32xf32> loc("m.model.encoder.layers.1.ff.0")
    %187 = "fsdp.gelu"(%186) <{approximate = "none"}> : (tensor<6x4x32xf32>) -> tensor<6x4x32xf32> loc("m.model.encoder.layers.1.ff.1")
    %188 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.1.ff.3.weight"}> : () -> tensor<16x32xf32>
    %189 = "fsdp.transpose"(%188) <{perm = array<i64: 1, 0>}> : (tensor<16x32xf32>) -> tensor<32x16xf32> loc("m.model.encoder.layers.1.ff.3")
    %190 = "fsdp.get_parameter"() <{param = @"m.model.encoder.layers.1.ff.3.bias"}> : () -> tensor<16xf32>
    %191 = "fsdp.matmul"(%187, %189, %190) : (tensor<6x4x32xf32>, tensor<32x16xf32>, tensor<16xf32>) -> tensor<6x4x16xf32> loc("m.model.encoder.layers.1.ff.3")
    %192 = "fsdp.add"(%163, %191) : (tensor<6x4x16xf32>, tensor<6x4x16xf32>) -> tensor<6x4x16xf32> loc("m.model.encoder.layers.1")
    %193 = "fsdp.reshape"(%192) : (tensor<6x4x16xf32>) -> tensor<2x3x4x16xf32> loc("m.model.encoder.layers.1")
    %194 = "fsdp.reduce_mean"(%193) <{axes = array<i64: 2>, keepdims = false}> : (tensor<2x3x4x16xf32>) -> tensor<2x3x16xf32> loc("m.head")
    %195 = "fsdp.get_parameter"() <{param = @"m.head.projection.weight"}> : () -> tensor<8x16xf32>
    %196 = "fsdp.transpose"(%195) <{perm = array<i64: 1, 0>}> : (tensor<8x16xf32>) -> tensor<16x8xf32> loc("m.head.projection")
    %197 = "fsdp.get_parameter"() <{param = @"m.head.projection.bias"}> : () -> tensor<8xf32>
    %198 = "fsdp.matmul"(%194, %196, %197) : (tensor<2x3x16xf32>, tensor<16x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32> loc("m.head.projection")
    %199 = "fsdp.transpose"(%198) <{perm = array<i64: 0, 2, 1>}> : (tensor<2x3x8xf32>) -> tensor<2x8x3xf32> loc("m.head")
    %200 = "fsdp.mul"(%199, %15) : (tensor<2x8x3xf32>, tensor<2x1x3xf32>) -> tensor<2x8x3xf32> loc("m")
    %201 = "fsdp.add"(%200, %6) : (tensor<2x8x3xf32>, tensor<2x1x3xf32>) -> tensor<2x8x3xf32> loc("m")
    func.return %201 : tensor<2x8x3xf32>
  }
}
