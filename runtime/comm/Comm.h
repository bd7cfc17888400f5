//===- Comm.h - Collectives between ranks: local, MPI or Gloo --*- C++ -*-===//
//
// The executor starts a collective at the plan's `*_start` instruction and
// completes it at `wait`; `slot` is the start instruction's index. `local`
// serves world size 1; `mpi` (Debian's OpenMPI) serves processes mpirun
// started, `gloo` (Debian's Gloo) processes torchrun or srun started
// without MPI. Both are non-blocking, with waits against a deadline, so a
// dead or hung rank becomes an error on the others, not a hang.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_COMM_COMM_H
#define FSDP_RUNTIME_COMM_COMM_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <memory>
#include <string>

namespace fsdp {

/// The ranks a collective runs over. With hybrid sharding the world splits
/// into shard groups of `shardSize` consecutive ranks (which share one copy
/// of the parameters) and replicate groups (the ranks holding the same
/// shard: equal rank % shardSize). Without it the shard group is the world.
/// `Block`: blocks of consecutive ranks (partial resharding after forward).
enum class Group { World, Shard, Replicate, Block };

/// How the world's ranks form groups: shard groups of `shard` consecutive
/// ranks, replicate groups across them, blocks of `block` consecutive ranks.
/// Every communicator places ranks the same way.
struct GroupLayout {
  int64_t ranks = 1, shard = 1, block = 1;

  /// Checks that shard divides ranks and block (0: none) divides shard.
  Status set(int64_t worldRanks, int64_t shardSize, int64_t blockSize);
  /// Rank r's position in its group of kind g, and which group that is.
  int64_t position(int64_t r, Group g) const;
  int64_t key(int64_t r, Group g) const;
  int64_t size(Group g) const;
};

/// Element types collectives sum: float32, bfloat16, IEEE half.
enum class Elem { F32, BF16, F16 };
int64_t elemBytes(Elem e);

class Comm {
public:
  virtual ~Comm() = default;
  virtual int64_t rank() const = 0;
  virtual int64_t size() const = 0;
  /// Forms the shard, replicate and block groups (collective; before any
  /// use). `blockSize` 0: no block group.
  virtual Status split(int64_t shardSize, int64_t blockSize = 0) = 0;
  /// This rank's index in, and the size of, its group of kind `g`.
  virtual int64_t rank(Group g) const = 0;
  virtual int64_t size(Group g) const = 0;
  /// Prepares `slots` request slots (before the first step: no allocation
  /// inside one).
  virtual void reserve(int64_t slots) = 0;
  /// Starts out = sum (or mean) over ranks of `in`, `count` elements of
  /// type `e` (16-bit sums round each partial sum, as a bf16 reduction
  /// does); `in` may equal `out`.
  virtual Status allReduceStart(const void *in, void *out, int64_t count,
                                Elem e, bool average, int64_t slot,
                                Group g = Group::World) = 0;
  /// Starts out = the concatenation, in rank order, of every rank's `count`
  /// elements `in` of `elemBytes` bytes each (any dtype: nothing is summed).
  virtual Status allGatherStart(const void *in, void *out, int64_t count,
                                int64_t elemBytes, int64_t slot,
                                Group g = Group::Shard) = 0;
  /// Starts out = this rank's `count` elements of the sum (or mean) over
  /// ranks of `in` (`count` times the world size elements).
  virtual Status reduceScatterStart(const void *in, void *out, int64_t count,
                                    Elem e, bool average, int64_t slot,
                                    Group g = Group::Shard) = 0;
  virtual Status wait(int64_t slot) = 0;
  /// Every rank holds the same `value` as rank 0, or it is an error on every
  /// rank naming `what`.
  virtual Status checkSame(uint64_t value, const std::string &what) = 0;
  /// Every rank receives rank 0's `bytes` bytes at `data` (set-up, outside
  /// the plan's slots: NCCL's unique id); `key` names it, once per process.
  virtual Status broadcast(void *data, int64_t bytes,
                           const std::string &key) = 0;
  /// Whether collectives move while the rank computes (Gloo's lanes), or
  /// only inside its calls into the engine (MPI's progress).
  virtual bool progressesAlone() const { return false; }
  /// Ends every rank's process (after an error on this one).
  virtual void abort(int code) = 0;
};

std::unique_ptr<Comm> localComm();

/// checkSame's verdict on one rank: `mismatch` (this rank's value is not
/// rank 0's), `any` (some rank's is not).
Status sameAsRankZero(int64_t rank, bool mismatch, bool any,
                      const std::string &what);

/// True when this process was started by mpirun (or another MPI launcher).
bool launchedByMpi();

/// The rank and world size a launcher put in the environment: torchrun
/// (RANK, WORLD_SIZE, LOCAL_RANK) or Slurm (SLURM_PROCID, SLURM_NTASKS,
/// SLURM_LOCALID).
struct LaunchInfo {
  int64_t rank = 0, size = 1, localRank = 0;
  std::string launcher; // "torchrun" or "slurm"; empty when neither
};
/// Reads them; a malformed value is an error naming the variable.
Status launchInfo(LaunchInfo &out);
/// The launcher's view must agree with the communicator's.
Status checkLaunch(const LaunchInfo &launch, const Comm *comm);

/// For processes a launcher started without MPI (torchrun, Slurm without
/// PMIx): Gloo over TCP, the ranks meeting through the c10d store at
/// MASTER_ADDR:MASTER_PORT, torchrun's agent's or one rank 0 serves there
/// (at FSDP_STORE_PORT when set) (runtime/comm/GlooComm.cpp).
Status glooComm(const LaunchInfo &launch, double timeoutSeconds,
                std::unique_ptr<Comm> &out);

/// Initialises MPI (once per process); waits give up after `timeoutSeconds`.
Status mpiComm(double timeoutSeconds, std::unique_ptr<Comm> &out);

} // namespace fsdp

#endif // FSDP_RUNTIME_COMM_COMM_H
