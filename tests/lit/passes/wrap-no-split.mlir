// RUN: fsdp-opt %s -fsdp-wrap-units 2>&1 | FileCheck %s
// RUN: fsdp-opt %s '-fsdp-wrap-units=wrap=class:Layer' 2>&1 | FileCheck %s --check-prefix=CLASS

// A Hugging Face model's _no_split_modules, recorded by the tracer
// (fsdp.no_split_modules): the default policy makes a unit of each module
// of those classes, as Accelerate's TRANSFORMER_BASED_WRAP does (BERT's
// embeddings included); an explicit --wrap still rules.
// CHECK: remark: transformer policy: a unit per module of class Emb, Layer (the model's _no_split_modules, as Accelerate's TRANSFORMER_BASED_WRAP)
// CHECK-DAG: fsdp.unit @bert.embeddings {params = [@bert.embeddings.word.w, @bert.embeddings.ln.w]}
// CHECK-DAG: fsdp.unit @bert.encoder.layer.0 {params = [@bert.encoder.layer.0.q.w]}
// CHECK-DAG: fsdp.unit @bert.encoder.layer.1 {params = [@bert.encoder.layer.1.q.w]}
// CHECK-DAG: fsdp.unit @root {params = [@classifier.w], reshard_after_forward = false}
// CLASS-NOT: _no_split_modules
// CLASS-DAG: fsdp.unit @root {params = [@bert.embeddings.word.w, @bert.embeddings.ln.w, @classifier.w], reshard_after_forward = false}
module attributes {fsdp.no_split_modules = ["Emb", "Layer"]} {
fsdp.parameter @bert.embeddings.word.w : tensor<8x4xf32> {module_path = "bert.embeddings.word", module_classes = ["Cls", "Bert", "Emb", "Embedding"]}
fsdp.parameter @bert.embeddings.ln.w : tensor<4xf32> {module_path = "bert.embeddings.ln", module_classes = ["Cls", "Bert", "Emb", "LayerNorm"]}
fsdp.parameter @bert.encoder.layer.0.q.w : tensor<4x4xf32> {module_path = "bert.encoder.layer.0.q", module_classes = ["Cls", "Bert", "Encoder", "ModuleList", "Layer", "Linear"]}
fsdp.parameter @bert.encoder.layer.1.q.w : tensor<4x4xf32> {module_path = "bert.encoder.layer.1.q", module_classes = ["Cls", "Bert", "Encoder", "ModuleList", "Layer", "Linear"]}
fsdp.parameter @classifier.w : tensor<4x3xf32> {module_path = "classifier", module_classes = ["Cls", "Linear"]}
}
