//===- DriverFlags.td - fsdp-opt's flags that set pass options -*- tablegen -*-===//
//
// Each fsdp-opt flag that sets a pass option IS that option: its name,
// type, default and help come from the option's one definition in
// passes/Passes.td. This file only says which passes' options fsdp-opt
// shows, in which --help group, and which string options are a closed set
// of choices (refused at parse time, listing the valid values).
// tools/gen_driver_flags.py turns it into DriverFlags.inc.
//
//===----------------------------------------------------------------------===//
include "passes/Passes.td"

// Every option of `pass` is an fsdp-opt flag in `group` (model, train,
// fsdp, device or output), but those named in `skip`.
class FlagsOf<string pass_, string group_, list<string> skip_ = []> {
  string pass = pass_;
  string group = group_;
  list<string> skip = skip_;
}
// One option shown in another group than its pass's.
class FlagGroup<string pass_, string option_, string group_> {
  string pass = pass_;
  string option = option_;
  string group = group_;
}
// A string option whose value must be one of `values`.
class FlagChoices<string pass_, string option_, list<string> values_> {
  string pass = pass_;
  string option = option_;
  list<string> values = values_;
}

def : FlagsOf<"FsdpBuildTrainStep", "train", ["world-size"]>;
def : FlagsOf<"FsdpWrapUnits", "fsdp">;
def : FlagsOf<"FsdpMergeUnits", "fsdp">;
def : FlagsOf<"FsdpCheckpointActivations", "fsdp">;
def : FlagsOf<"FsdpShard", "fsdp", ["keep-sharded", "offload"]>;
def : FlagsOf<"FsdpOffload", "fsdp", ["offload-shape"]>;
def : FlagsOf<"FsdpSchedule", "fsdp">;
def : FlagsOf<"FsdpSimulate", "device", ["annotate"]>;

def : FlagGroup<"FsdpBuildTrainStep", "compute-dtype", "fsdp">;

def : FlagChoices<"FsdpBuildTrainStep", "loss", ["auto", "cross-entropy", "mse", "bce"]>;
def : FlagChoices<"FsdpBuildTrainStep", "optimizer", ["adamw", "sgd"]>;
def : FlagChoices<"FsdpBuildTrainStep", "loss-average", ["ranks", "tokens"]>;
def : FlagChoices<"FsdpBuildTrainStep", "lr-schedule", ["constant", "cosine"]>;
def : FlagChoices<"FsdpBuildTrainStep", "compute-dtype", ["f32", "bf16", "f16"]>;
def : FlagChoices<"FsdpShard", "strategy",
                  ["full-shard", "shard-grad-op", "hybrid-shard", "no-shard"]>;
def : FlagChoices<"FsdpShard", "param-dtype", ["f32", "bf16", "f16"]>;
def : FlagChoices<"FsdpShard", "reduce-dtype", ["f32", "bf16", "f16"]>;
def : FlagChoices<"FsdpShard", "buffer-dtype", ["f32", "bf16", "f16"]>;
def : FlagChoices<"FsdpSchedule", "backward-prefetch", ["pre", "post", "none"]>;
def : FlagChoices<"FsdpSimulate", "simulate-runtime", ["fsdp", "fsdp2-eager"]>;
def : FlagChoices<"FsdpOffload", "offload-update", ["before-use", "after-backward"]>;
