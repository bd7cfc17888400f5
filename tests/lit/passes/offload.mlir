// RUN: fsdp-opt %s -fsdp-build-train-step='loss=mse grad-clip=1.0' '-fsdp-wrap-units=wrap=regex:layers\.[0-9]+' '-fsdp-shard=world-size=2 param-dtype=bf16' -fsdp-insert-collectives '-fsdp-offload=offload=optimizer offload-update=after-backward' -fsdp-schedule -fsdp-plan-memory -fsdp-verify-plan 2>/dev/null | FileCheck %s --check-prefix=OPT
// RUN: fsdp-opt %s -fsdp-build-train-step='loss=mse grad-clip=1.0' '-fsdp-wrap-units=wrap=regex:layers\.[0-9]+' '-fsdp-shard=world-size=2 param-dtype=bf16' -fsdp-insert-collectives '-fsdp-offload=offload=optimizer' -fsdp-schedule -fsdp-plan-memory -fsdp-verify-plan 2>/dev/null | FileCheck %s --check-prefix=DEFER
// RUN: fsdp-opt %s -fsdp-build-train-step='loss=mse' '-fsdp-wrap-units=wrap=regex:layers\.[0-9]+' '-fsdp-shard=world-size=2 param-dtype=bf16' -fsdp-insert-collectives '-fsdp-offload=offload=all,layers.1=none offload-update=after-backward' -fsdp-schedule -fsdp-plan-memory -fsdp-verify-plan 2>/dev/null | FileCheck %s --check-prefix=ALL
// RUN: fsdp-opt %s -fsdp-build-train-step='loss=mse grad-clip=1.0' '-fsdp-wrap-units=wrap=regex:layers\.[0-9]+' '-fsdp-shard=world-size=2 param-dtype=bf16' -fsdp-insert-collectives '-fsdp-offload=offload=all' -fsdp-schedule -fsdp-plan-memory -fsdp-verify-plan 2>/dev/null | FileCheck %s --check-prefix=ALLDEFER
// RUN: fsdp-opt %s -fsdp-build-train-step='loss=mse' '-fsdp-wrap-units=wrap=regex:layers\.[0-9]+' '-fsdp-shard=world-size=2 param-dtype=bf16' -fsdp-insert-collectives '-fsdp-offload=offload=all offload-shape=fsdp2' -fsdp-schedule -fsdp-verify-plan 2>/dev/null | FileCheck %s --check-prefix=FSDP2
// RUN: not fsdp-opt %s -fsdp-build-train-step='loss=mse' '-fsdp-wrap-units=wrap=regex:layers\.[0-9]+' -fsdp-shard=world-size=1 -fsdp-insert-collectives '-fsdp-offload=offload=optimizer' 2>&1 | FileCheck %s --check-prefix=NOSHARDS
// RUN: fsdp-opt %s -fsdp-build-train-step='loss=mse' '-fsdp-wrap-units=wrap=regex:layers\.[0-9]+' '-fsdp-shard=world-size=1 keep-sharded=true' -fsdp-insert-collectives '-fsdp-offload=offload=optimizer' -fsdp-schedule -fsdp-plan-memory -fsdp-verify-plan 2>/dev/null | FileCheck %s --check-prefix=ONERANK
// RUN: not fsdp-opt %s -fsdp-build-train-step='loss=mse' '-fsdp-wrap-units=wrap=regex:layers\.[0-9]+' -fsdp-shard=world-size=2 -fsdp-insert-collectives '-fsdp-offload=offload=sometimes' 2>&1 | FileCheck %s --check-prefix=BADMODE
// RUN: not fsdp-opt %s -fsdp-build-train-step='loss=mse' '-fsdp-wrap-units=wrap=regex:layers\.[0-9]+' -fsdp-shard=world-size=2 -fsdp-insert-collectives '-fsdp-offload=offload=none,layers.7=all' 2>&1 | FileCheck %s --check-prefix=BADUNIT
// RUN: not fsdp-opt %s -fsdp-build-train-step='loss=mse' '-fsdp-wrap-units=wrap=regex:layers\.[0-9]+' -fsdp-shard=world-size=2 -fsdp-insert-collectives '-fsdp-offload=offload=none,layers.0=host' 2>&1 | FileCheck %s --check-prefix=BADUNITMODE
// RUN: fsdp-opt %s -fsdp-build-train-step='loss=mse grad-clip=1.0' '-fsdp-wrap-units=wrap=regex:layers\.[0-9]+' '-fsdp-shard=world-size=2 param-dtype=bf16 offload=optimizer:0.2' -fsdp-insert-collectives '-fsdp-offload=offload=optimizer:0.2' -fsdp-schedule -fsdp-plan-memory -fsdp-verify-plan 2>&1 | FileCheck %s --check-prefix=SHARE
// RUN: not fsdp-opt %s -fsdp-build-train-step='loss=mse' '-fsdp-wrap-units=wrap=regex:layers\.[0-9]+' '-fsdp-shard=world-size=2 offload=none,layers.0=all:1.5' -fsdp-insert-collectives 2>&1 | FileCheck %s --check-prefix=BADSHARE
// RUN: not fsdp-opt %s -fsdp-build-train-step='loss=mse' '-fsdp-wrap-units=wrap=regex:layers\.[0-9]+' '-fsdp-shard=world-size=2 offload=none:0.5' -fsdp-insert-collectives 2>&1 | FileCheck %s --check-prefix=BADSHARENONE

// Offload `optimizer` (ZeRO-Offload): the gathers read the bf16 device
// copy; each reduced gradient shard is copied to the host as soon as its
// reduce-scatter completes; the update runs on the host, then the host
// casts the master shard and copies it back into the device copy. The
// host values live in a host arena of their own.
// OPT: fsdp.host_arena_bytes = {{[1-9][0-9]*}} : i64
// OPT: fsdp.flat_parameter @layers.0.flat : tensor<8xf32> {device_copy = bf16, {{.*}}offload = "optimizer"
// OPT-LABEL: func.func @train_step
// OPT: %[[DC:.*]] = fsdp.get_device_copy @layers.0.flat {{.*}}: tensor<8xbf16>
// OPT-NEXT: fsdp.all_gather_start %[[DC]]
// OPT: %[[RS:.*]] = fsdp.wait %{{.*}}: !fsdp.future<tensor<8xf32>>
// OPT-NEXT: %[[D2H:.*]] = fsdp.copy_start %[[RS]] {{{.*}}fsdp.stream = "d2h", to = "host"}
// OPT: %[[GH:.*]] = fsdp.wait %[[D2H]]
// OPT: fsdp.adamw @layers.0.flat, %[[GH]] scaled by %{{.*}} : tensor<f32> {{{.*}}fsdp.on_host{{.*}}} : tensor<8xf32>
// OPT-NEXT: %[[M:.*]] = fsdp.get_shard @layers.0.flat {{.*}}: tensor<8xf32>
// OPT-NEXT: %[[C:.*]] = fsdp.cast %[[M]] {{{.*}}fsdp.on_host} : tensor<8xf32> -> tensor<8xbf16>
// OPT-NEXT: %[[H2D:.*]] = fsdp.copy_start %[[C]] {{{.*}}fsdp.stream = "h2d", into = @layers.0.flat, to = "device"}
// OPT-NEXT: fsdp.wait %[[H2D]]

// Offload `optimizer`, updated before use (the default): each step
// first copies its reduced gradient shards and the clipping scale into host
// buffers; the next step updates each shard on the host just before its
// unit's first gather, writing the bf16 cast in the same pass (AdamW's
// fused copy), and copies that into the device copy, which the gathers read
// (forward and backward). Every op of the update is marked deferred with
// its flat.
// DEFER: fsdp.host_buffer @layers.0.flat.grad : tensor<8xf32>
// DEFER: fsdp.host_buffer @offload.grad_scale : tensor<f32>
// DEFER-LABEL: func.func @train_step
// DEFER: %[[G:.*]] = fsdp.get_host_buffer @layers.0.flat.grad {fsdp.deferred = @layers.0.flat{{.*}}: tensor<8xf32>
// DEFER-NEXT: %[[K:.*]] = fsdp.get_host_buffer @offload.grad_scale {fsdp.deferred = @layers.0.flat{{.*}}: tensor<f32>
// DEFER-NEXT: %[[C:.*]] = fsdp.adamw @layers.0.flat, %[[G]] scaled by %[[K]] : tensor<f32> {{{.*}}fsdp.deferred = @layers.0.flat, {{.*}}fsdp.on_host{{.*}}} : tensor<8xf32> -> tensor<8xbf16>
// DEFER-NEXT: %[[F:.*]] = fsdp.copy_start %[[C]] {fsdp.deferred = @layers.0.flat, {{.*}}into = @layers.0.flat, to = "device"}
// DEFER-NEXT: %[[DC:.*]] = fsdp.wait %[[F]] {fsdp.deferred = @layers.0.flat
// DEFER-NEXT: fsdp.all_gather_start %[[DC]]
// DEFER: fsdp.copy_start %{{.*}} {{{.*}}into = @layers.0.flat.grad, to = "host"}
// DEFER: fsdp.copy_start %{{.*}} {{{.*}}into = @offload.grad_scale, to = "host"}
// DEFER-NOT: fsdp.adamw

// Offload `all`, updated before use: the fused copy goes into a host
// buffer that is a cast of the shard (the runtime fills it where no update
// ran), and every gather of the unit copies it to the device: no host cast.
// ALLDEFER: fsdp.host_buffer @layers.0.flat.gather : tensor<8xbf16> {copy_of = @layers.0.flat}
// ALLDEFER-LABEL: func.func @train_step
// ALLDEFER: %[[C:.*]] = fsdp.adamw @layers.0.flat, {{.*}}into = @layers.0.flat.gather{{.*}} -> tensor<8xbf16>
// ALLDEFER-NEXT: %[[F:.*]] = fsdp.copy_start %[[C]] {{{.*}}to = "device"}
// ALLDEFER-NEXT: %[[W:.*]] = fsdp.wait %[[F]]
// ALLDEFER-NEXT: fsdp.all_gather_start %[[W]]
// ALLDEFER: %[[C1:.*]] = fsdp.adamw @layers.1.flat, {{.*}} -> tensor<6xbf16>
// ALLDEFER-NEXT: fsdp.copy_start %[[C1]] {{{.*}}to = "device"}
// ALLDEFER: fsdp.copy_start %[[C1]] {{{.*}}to = "device"}
// ALLDEFER-NOT: fsdp.cast {{.*}}fsdp.on_host

// Offload `all` but layers.1: each gather of layers.0 reads the master
// shard cast on the host and copied to the device; layers.1 stays as it
// was (a device shard, cast and updated on the device).
// ALL: fsdp.flat_parameter @layers.0.flat : tensor<8xf32> {group_size = 2 : i64, numel = 15 : i64, offload = "all", offsets
// ALL: fsdp.flat_parameter @layers.1.flat : tensor<6xf32> {group_size = 2 : i64, numel = 12 : i64, offsets
// ALL-LABEL: func.func @train_step
// ALL: %[[S:.*]] = fsdp.get_shard @layers.0.flat {{.*}}: tensor<8xf32>
// ALL-NEXT: %[[C:.*]] = fsdp.cast %[[S]] {{{.*}}fsdp.on_host} : tensor<8xf32> -> tensor<8xbf16>
// ALL-NEXT: %[[F:.*]] = fsdp.copy_start %[[C]] {{{.*}}to = "device"}
// ALL-NEXT: %[[W:.*]] = fsdp.wait %[[F]]
// ALL-NEXT: fsdp.all_gather_start %[[W]]
// ALL: %[[S1:.*]] = fsdp.get_shard @layers.1.flat {{.*}}: tensor<6xf32>
// ALL-NEXT: fsdp.cast %[[S1]] {fsdp.offsets = array<i64: {{[0-9]+}}>} : tensor<6xf32> -> tensor<6xbf16>
// ALL: fsdp.adamw @layers.0.flat, {{.*}}fsdp.on_host
// ALL: fsdp.adamw @layers.1.flat, %{{[0-9]+}} scaled by %{{[0-9]+}} : tensor<f32> {beta1 = {{.*}}, eps = {{[^,]*}}, lr = {{.*}} : tensor<6xf32>

// FSDP2's CPUOffloadPolicy: the f32 shard is copied, then cast on the device.
// FSDP2: %[[S:.*]] = fsdp.get_shard @layers.0.flat : tensor<8xf32>
// FSDP2-NEXT: %[[F:.*]] = fsdp.copy_start %[[S]] {{{.*}}to = "device"} : tensor<8xf32>
// FSDP2-NEXT: %[[W:.*]] = fsdp.wait %[[F]]
// FSDP2-NEXT: %[[C:.*]] = fsdp.cast %[[W]] : tensor<8xf32> -> tensor<8xbf16>
// FSDP2-NEXT: fsdp.all_gather_start %[[C]]

// One rank without keep-sharded has no shards to offload (the pipeline
// keeps them when --offload is given).
// ONERANK: fsdp.flat_parameter @layers.0.flat : tensor<15xf32> {device_copy = f32, group_size = 1 : i64{{.*}}offload = "optimizer"
// ONERANK: fsdp.copy_start %{{.*}} {{{.*}}into = @layers.0.flat, to = "device"} : tensor<15xf32>
// NOSHARDS: error: --offload=optimizer: no sharded, trained state to offload
// BADMODE: error: --offload: 'sometimes' is not none, optimizer or all
// BADUNIT: error: --offload names unit 'layers.7', which is not a unit of this model
// BADUNITMODE: error: --offload: unit 'layers.0' is given 'host', not none, optimizer or all
fsdp.parameter @"layers.0.w" : tensor<4x3xf32> {module_path = "layers.0"}
fsdp.parameter @"layers.0.b" : tensor<3xf32> {module_path = "layers.0"}
fsdp.parameter @"layers.1.w" : tensor<3x3xf32> {module_path = "layers.1"}
fsdp.parameter @"layers.1.b" : tensor<3xf32> {module_path = "layers.1"}
fsdp.parameter @"head.w" : tensor<3x2xf32> {module_path = "head"}
func.func @forward(%x: tensor<2x4xf32> {fsdp.name = "x"}) -> (tensor<2x2xf32> {fsdp.name = "y"}) {
  %w0 = fsdp.get_parameter @"layers.0.w" : tensor<4x3xf32>
  %b0 = fsdp.get_parameter @"layers.0.b" : tensor<3xf32>
  %h0 = fsdp.gemm %x, %w0, %b0 : (tensor<2x4xf32>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %r0 = fsdp.relu %h0 : tensor<2x3xf32>
  %w1 = fsdp.get_parameter @"layers.1.w" : tensor<3x3xf32>
  %b1 = fsdp.get_parameter @"layers.1.b" : tensor<3xf32>
  %h1 = fsdp.gemm %r0, %w1, %b1 : (tensor<2x3xf32>, tensor<3x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %r1 = fsdp.relu %h1 : tensor<2x3xf32>
  %wh = fsdp.get_parameter @"head.w" : tensor<3x2xf32>
  %y = fsdp.matmul %r1, %wh : tensor<2x3xf32>, tensor<3x2xf32> -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}

// A share of each unit (MODE:FRACTION): its last parameters, whole, until
// the share is reached, in a flat buffer of their own that is offloaded;
// the rest stays on the device and is updated there. A unit of one
// parameter goes whole.
// SHARE: remark: unit 'layers.0': --offload optimizer:0.20 offloads its last 1 of 2 trained parameters, 3 of 15 elements
// SHARE: remark: unit 'root': --offload optimizer:0.20 offloads its last 1 of 1 trained parameters, 6 of 6 elements
// SHARE: fsdp.flat_parameter @layers.0.flat : tensor<6xf32> {group_size = 2 : i64, numel = 12 : i64, offsets = array<i64: 0>, params = [@layers.0.w], trainable = true, unit = @layers.0}
// SHARE-NEXT: fsdp.flat_parameter @layers.0.offload_flat : tensor<2xf32> {device_copy = bf16, fsdp.offload_part, {{.*}}offload = "optimizer", offsets = array<i64: 0>, params = [@layers.0.b], trainable = true, unit = @layers.0}
// SHARE-NOT: fsdp.flat_parameter @root.flat
// SHARE: fsdp.flat_parameter @root.offload_flat
// SHARE-LABEL: func.func @train_step
// SHARE: fsdp.adamw @layers.0.offload_flat, {{.*}}fsdp.on_host
// SHARE: fsdp.adamw @layers.0.flat, {{.*}} : tensor<6xf32>{{$}}
// BADSHARE: error: --offload: unit 'layers.0' is given 'all:1.5', not none, optimizer or all (optionally :FRACTION in (0, 1])
// BADSHARENONE: error: --offload: 'none:0.5' is not none, optimizer or all
