// RUN: fsdp-opt %s -fsdp-wrap-units -verify-diagnostics | FileCheck %s
// RUN: fsdp-opt %s '-fsdp-wrap-units=wrap=size:40' | FileCheck %s --check-prefix=SIZE
// RUN: fsdp-opt %s '-fsdp-wrap-units=wrap=regex:blocks\.[0-9]+\.mlp' | FileCheck %s --check-prefix=REGEX
// RUN: fsdp-opt %s '-fsdp-wrap-units=wrap=none' | FileCheck %s --check-prefix=NONE
// RUN: not fsdp-opt %s '-fsdp-wrap-units=wrap=transformer:decoder' 2>&1 | FileCheck %s --check-prefix=NOMATCH
// RUN: not fsdp-opt %s '-fsdp-wrap-units=wrap=size:x' 2>&1 | FileCheck %s --check-prefix=BADSIZE
// RUN: not fsdp-opt %s '-fsdp-wrap-units=wrap=pipeline' 2>&1 | FileCheck %s --check-prefix=BADPOLICY

// transformer: one unit per block of the largest isomorphic family
// (blocks.N: same relative names and shapes); the rest is the root unit,
// which stays gathered after forward.
// CHECK-DAG: fsdp.unit @blocks.0 {params = [@blocks.0.attn.w, @blocks.0.mlp.w]}
// CHECK-DAG: fsdp.unit @blocks.1 {params = [@blocks.1.attn.w, @blocks.1.mlp.w]}
// CHECK-DAG: fsdp.unit @root {params = [@embed.w, @head.w], reshard_after_forward = false}
// expected-remark @+1 {{unit 'root': 2 parameters, 64 elements (transformer policy)}}
fsdp.parameter @embed.w : tensor<8x4xf32> {module_path = "embed"}
// expected-remark @+1 {{unit 'blocks.0': 2 parameters, 32 elements (transformer policy)}}
fsdp.parameter @blocks.0.attn.w : tensor<4x4xf32> {module_path = "blocks.0.attn"}
fsdp.parameter @blocks.0.mlp.w : tensor<4x4xf32> {module_path = "blocks.0.mlp"}
// expected-remark @+1 {{unit 'blocks.1': 2 parameters, 32 elements (transformer policy)}}
fsdp.parameter @blocks.1.attn.w : tensor<4x4xf32> {module_path = "blocks.1.attn"}
fsdp.parameter @blocks.1.mlp.w : tensor<4x4xf32> {module_path = "blocks.1.mlp"}
fsdp.parameter @head.w : tensor<8x4xf32> {module_path = "head"}

// size:40 closes a unit once a module holds 40 elements, bottom-up: a block
// (32) is too small alone, so the blocks container takes both blocks.
// SIZE-DAG: fsdp.unit @blocks {params = [@blocks.0.attn.w, @blocks.0.mlp.w, @blocks.1.attn.w, @blocks.1.mlp.w]}
// REGEX-DAG: fsdp.unit @blocks.0.mlp {params = [@blocks.0.mlp.w]}
// REGEX-DAG: fsdp.unit @blocks.1.mlp {params = [@blocks.1.mlp.w]}
// REGEX-DAG: fsdp.unit @root {params = [@embed.w, @blocks.0.attn.w, @blocks.1.attn.w, @head.w], reshard_after_forward = false}
// NONE: fsdp.unit @root {params = [@embed.w, @blocks.0.attn.w, @blocks.0.mlp.w, @blocks.1.attn.w, @blocks.1.mlp.w, @head.w], reshard_after_forward = false}
// NOMATCH: error: --wrap=transformer:decoder matches no repeated block
// BADSIZE: error: --wrap=size needs a positive element count, got 'x'
// BADPOLICY: error: unknown --wrap policy 'pipeline'
