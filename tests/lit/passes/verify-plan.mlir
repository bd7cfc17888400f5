// RUN: fsdp-opt %s -split-input-file -fsdp-verify-plan -verify-diagnostics

// Broken IR, one mistake per case, each reported at the op that makes it.

module attributes {fsdp.world_size = 2 : i64} {
  fsdp.parameter @w : tensor<2x3xf32> {module_path = "l"}
  fsdp.parameter @b : tensor<3xf32> {module_path = "l"}
  fsdp.unit @l {params = [@w, @b]}
  fsdp.flat_parameter @l.flat : tensor<5xf32> {group_size = 2 : i64, numel = 9 : i64, offsets = array<i64: 0, 6>, params = [@w, @b], trainable = true, unit = @l}
  func.func @train_step(%x: tensor<4x2xf32>) -> tensor<4x3xf32> {
    // expected-error @below {{reads parameter 'w' whole, but it lives sharded in 'l.flat': it must be gathered first}}
    %w = fsdp.get_parameter @w : tensor<2x3xf32>
    %y = fsdp.matmul %x, %w : tensor<4x2xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
    return %y : tensor<4x3xf32>
  }
}

// -----

module attributes {fsdp.world_size = 2 : i64} {
  fsdp.parameter @w : tensor<2x3xf32> {module_path = "l"}
  fsdp.parameter @b : tensor<3xf32> {module_path = "l"}
  fsdp.unit @l {params = [@w, @b]}
  fsdp.flat_parameter @l.flat : tensor<5xf32> {group_size = 2 : i64, numel = 9 : i64, offsets = array<i64: 0, 6>, params = [@w, @b], trainable = true, unit = @l}
  func.func @train_step(%x: tensor<4x2xf32>, %buf: tensor<10xf32>) -> tensor<4x3xf32> {
    // expected-error @below {{views a buffer that is not a gathered flat parameter}}
    %w = fsdp.param_view %buf {offset = 0 : i64} : tensor<10xf32> -> tensor<2x3xf32>
    %y = fsdp.matmul %x, %w : tensor<4x2xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
    return %y : tensor<4x3xf32>
  }
}

// -----

module attributes {fsdp.world_size = 2 : i64} {
  fsdp.parameter @w : tensor<2x3xf32> {module_path = "l"}
  fsdp.parameter @b : tensor<3xf32> {module_path = "l"}
  fsdp.unit @l {params = [@w, @b]}
  fsdp.flat_parameter @l.flat : tensor<5xf32> {group_size = 2 : i64, numel = 9 : i64, offsets = array<i64: 0, 6>, params = [@w, @b], trainable = true, unit = @l}
  func.func @train_step(%x: tensor<4x2xf32>) -> tensor<4x3xf32> {
    %s = fsdp.get_shard @l.flat : tensor<5xf32>
    %f = fsdp.all_gather_start %s {group_size = 2 : i64} : tensor<5xf32> -> !fsdp.future<tensor<10xf32>>
    %full = fsdp.wait %f : !fsdp.future<tensor<10xf32>>
    // expected-error @below {{views elements [3, 9) of 'l.flat' as 'tensor<2x3xf32>', which is no parameter of it}}
    %w = fsdp.param_view %full {offset = 3 : i64} : tensor<10xf32> -> tensor<2x3xf32>
    %y = fsdp.matmul %x, %w : tensor<4x2xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
    return %y : tensor<4x3xf32>
  }
}

// -----

module attributes {fsdp.world_size = 2 : i64} {
  fsdp.parameter @w : tensor<2x3xf32> {module_path = "l"}
  fsdp.parameter @b : tensor<3xf32> {module_path = "l"}
  fsdp.unit @l {params = [@w, @b]}
  fsdp.flat_parameter @l.flat : tensor<5xf32> {group_size = 2 : i64, numel = 9 : i64, offsets = array<i64: 0, 6>, params = [@w, @b], trainable = true, unit = @l}
  func.func @train_step(%x: tensor<4x2xf32>) -> tensor<4x3xf32> {
    %s = fsdp.get_shard @l.flat : tensor<5xf32>
    %f = fsdp.all_gather_start %s {group_size = 2 : i64} : tensor<5xf32> -> !fsdp.future<tensor<10xf32>>
    %full = fsdp.wait %f : !fsdp.future<tensor<10xf32>>
    %w = fsdp.param_view %full {offset = 0 : i64} : tensor<10xf32> -> tensor<2x3xf32>
    // expected-remark @below {{freed here}}
    fsdp.free %full : tensor<10xf32>
    // expected-error @below {{reads a buffer after it is freed}}
    %y = fsdp.matmul %x, %w : tensor<4x2xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
    return %y : tensor<4x3xf32>
  }
}

// -----

module attributes {fsdp.world_size = 4 : i64} {
  fsdp.parameter @w : tensor<2x3xf32> {module_path = "l"}
  fsdp.unit @l {params = [@w]}
  fsdp.flat_parameter @l.flat : tensor<3xf32> {group_size = 2 : i64, numel = 6 : i64, offsets = array<i64: 0>, params = [@w], trainable = true, unit = @l}
  func.func @train_step(%g: tensor<8xf32>) -> tensor<6xf32> {
    %s = fsdp.get_shard @l.flat : tensor<3xf32>
    // expected-error @below {{gathers 'l.flat' over 2 ranks; it is sharded over 2 and its group has 4}}
    %f = fsdp.all_gather_start %s {group_size = 2 : i64} : tensor<3xf32> -> !fsdp.future<tensor<6xf32>>
    %full = fsdp.wait %f : !fsdp.future<tensor<6xf32>>
    // expected-error @below {{reduce-scatters over 2 ranks but its group has 4}}
    %r = fsdp.reduce_scatter_start %g {group_size = 2 : i64, reduction = "avg"} : tensor<8xf32> -> !fsdp.future<tensor<4xf32>>
    %gs = fsdp.wait %r : !fsdp.future<tensor<4xf32>>
    return %full : tensor<6xf32>
  }
}

// -----

// Two live tensors planned at overlapping arena bytes.
func.func @train_step(%x: tensor<4xf32> {fsdp.offset = 0 : i64}) -> tensor<4xf32> {
  %a = fsdp.relu %x {fsdp.offsets = array<i64: 64>} : tensor<4xf32>
  // expected-error @below {{arena bytes [72, 88) overlap a tensor still live at [64, 80)}}
  %b = fsdp.relu %x {fsdp.offsets = array<i64: 72>} : tensor<4xf32>
  %c = fsdp.add %a, %b {fsdp.offsets = array<i64: 128>} : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %c : tensor<4xf32>
}

// -----

// Offload: a gather of an offloaded shard with no copy to the device reads
// host memory on the device.
module attributes {fsdp.world_size = 2 : i64} {
  fsdp.parameter @w : tensor<2x3xf32> {module_path = "l"}
  fsdp.parameter @b : tensor<3xf32> {module_path = "l"}
  fsdp.unit @l {params = [@w, @b]}
  fsdp.flat_parameter @l.flat : tensor<5xf32> {group_size = 2 : i64, numel = 9 : i64, offload = "all", offsets = array<i64: 0, 6>, params = [@w, @b], trainable = true, unit = @l}
  func.func @train_step(%x: tensor<4x2xf32>) -> tensor<10xf32> {
    %s = fsdp.get_shard @l.flat : tensor<5xf32>
    // expected-error @below {{reads host memory on the device: it needs an fsdp.copy_start to the device first}}
    %f = fsdp.all_gather_start %s {group_size = 2 : i64} : tensor<5xf32> -> !fsdp.future<tensor<10xf32>>
    %full = fsdp.wait %f : !fsdp.future<tensor<10xf32>>
    return %full : tensor<10xf32>
  }
}

// -----

// Offload: the update of an offloaded shard runs on the host, from a
// gradient copied there.
module attributes {fsdp.world_size = 2 : i64} {
  fsdp.parameter @w : tensor<2x3xf32> {module_path = "l"}
  fsdp.parameter @b : tensor<3xf32> {module_path = "l"}
  fsdp.unit @l {params = [@w, @b]}
  fsdp.flat_parameter @l.flat : tensor<5xf32> {group_size = 2 : i64, numel = 9 : i64, offload = "all", offsets = array<i64: 0, 6>, params = [@w, @b], trainable = true, unit = @l}
  func.func @train_step(%g: tensor<5xf32>) {
    // expected-error @below {{updates 'l.flat' on the device, but its state is in host memory}}
    fsdp.adamw @l.flat, %g {beta1 = 0.9 : f32, beta2 = 0.999 : f32, eps = 1.0e-08 : f32, lr = 1.0e-03 : f32, weight_decay = 0.0 : f32} : tensor<5xf32>
    return
  }
}

// -----

// Offload: the host updates a shard while a copy of it to the device is
// still in flight (it would copy a half-updated shard).
module attributes {fsdp.world_size = 2 : i64} {
  fsdp.parameter @w : tensor<2x3xf32> {module_path = "l"}
  fsdp.parameter @b : tensor<3xf32> {module_path = "l"}
  fsdp.unit @l {params = [@w, @b]}
  fsdp.flat_parameter @l.flat : tensor<5xf32> {group_size = 2 : i64, numel = 9 : i64, offload = "all", offsets = array<i64: 0, 6>, params = [@w, @b], trainable = true, unit = @l}
  func.func @train_step(%g: tensor<5xf32>) -> tensor<5xf32> {
    %s = fsdp.get_shard @l.flat : tensor<5xf32>
    // expected-remark @below {{the copy starts here}}
    %f = fsdp.copy_start %s {to = "device"} : tensor<5xf32> -> !fsdp.future<tensor<5xf32>>
    %gf = fsdp.copy_start %g {to = "host"} : tensor<5xf32> -> !fsdp.future<tensor<5xf32>>
    %gh = fsdp.wait %gf : !fsdp.future<tensor<5xf32>>
    // expected-error @below {{writes 'l.flat' while a copy of it is still reading it}}
    fsdp.adamw @l.flat, %gh {beta1 = 0.9 : f32, beta2 = 0.999 : f32, eps = 1.0e-08 : f32, fsdp.on_host, lr = 1.0e-03 : f32, weight_decay = 0.0 : f32} : tensor<5xf32>
    %d = fsdp.wait %f : !fsdp.future<tensor<5xf32>>
    return %d : tensor<5xf32>
  }
}
