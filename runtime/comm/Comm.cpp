//===- Comm.cpp - Local and MPI collectives -------------------------------===//
#include "runtime/comm/Comm.h"
#include "runtime/comm/Reduce.h"

#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace fsdp {

int64_t elemBytes(Elem e) { return e == Elem::F32 ? 4 : 2; }

Status GroupLayout::set(int64_t worldRanks, int64_t shardSize,
                        int64_t blockSize) {
  if (shardSize < 1 || worldRanks % shardSize != 0 || blockSize < 0 ||
      (blockSize > 0 && shardSize % blockSize != 0))
    return Status::error("shard groups of " + std::to_string(shardSize) +
                         " ranks (blocks of " + std::to_string(blockSize) +
                         ") do not divide the " + std::to_string(worldRanks) +
                         " ranks");
  ranks = worldRanks;
  shard = shardSize;
  block = blockSize > 0 ? blockSize : 1;
  return Status::ok();
}

int64_t GroupLayout::position(int64_t r, Group g) const {
  switch (g) {
  case Group::World:
    return r;
  case Group::Shard:
    return r % shard;
  case Group::Replicate:
    return r / shard;
  case Group::Block:
    return r % block;
  }
  return 0;
}

int64_t GroupLayout::key(int64_t r, Group g) const {
  switch (g) {
  case Group::World:
    return 0;
  case Group::Shard:
    return r / shard;
  case Group::Replicate:
    return r % shard;
  case Group::Block:
    return r / block;
  }
  return 0;
}

int64_t GroupLayout::size(Group g) const {
  switch (g) {
  case Group::World:
    return ranks;
  case Group::Shard:
    return shard;
  case Group::Replicate:
    return ranks / shard;
  case Group::Block:
    return block;
  }
  return 1;
}

namespace {

/// MPI user reduction over 16-bit floats (Reduce.h's rounding sum).
template <Elem E> void sum16(void *in, void *inout, int *len, MPI_Datatype *) {
  sumElements(inout, in, inout, *len, E);
}

class Local : public Comm {
public:
  int64_t rank() const override { return 0; }
  int64_t size() const override { return 1; }
  Status split(int64_t shardSize, int64_t blockSize) override {
    return GroupLayout().set(1, shardSize, blockSize);
  }
  int64_t rank(Group) const override { return 0; }
  int64_t size(Group) const override { return 1; }
  void reserve(int64_t) override {}
  Status allReduceStart(const void *in, void *out, int64_t count, Elem e, bool,
                        int64_t, Group) override {
    if (in != out)
      std::memmove(out, in, count * elemBytes(e));
    return Status::ok();
  }
  Status allGatherStart(const void *in, void *out, int64_t count,
                        int64_t elemBytes, int64_t, Group) override {
    if (in != out)
      std::memmove(out, in, count * elemBytes);
    return Status::ok();
  }
  Status reduceScatterStart(const void *in, void *out, int64_t count, Elem e,
                            bool average, int64_t slot, Group g) override {
    return allReduceStart(in, out, count, e, average, slot, g);
  }
  Status wait(int64_t) override { return Status::ok(); }
  Status checkSame(uint64_t, const std::string &) override {
    return Status::ok();
  }
  Status broadcast(void *, int64_t, const std::string &) override {
    return Status::ok();
  }
  void abort(int code) override { std::_Exit(code); }
};

class Mpi : public Comm {
public:
  explicit Mpi(double timeout) : timeout(timeout) {
    int r = 0, s = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &s);
    rankId = r;
    ranks = s;
    layout.set(s, s, 0);
    MPI_Op_create(&sum16<Elem::BF16>, 1, &bf16Sum);
    MPI_Op_create(&sum16<Elem::F16>, 1, &f16Sum);
  }
  ~Mpi() override {
    for (MPI_Op *op : {&bf16Sum, &f16Sum})
      if (*op != MPI_OP_NULL)
        MPI_Op_free(op);
    for (MPI_Comm *c : {&shardComm, &replicaComm, &blockComm})
      if (*c != MPI_COMM_WORLD && *c != MPI_COMM_SELF && *c != MPI_COMM_NULL)
        MPI_Comm_free(c);
  }
  int64_t rank() const override { return rankId; }
  int64_t size() const override { return ranks; }
  Status split(int64_t size, int64_t block) override {
    FSDP_RETURN_IF_ERROR(layout.set(ranks, size, block));
    auto splitBy = [&](Group g, MPI_Comm *out) -> Status {
      if (MPI_Comm_split(MPI_COMM_WORLD, (int)layout.key(rankId, g),
                         (int)rankId, out) != MPI_SUCCESS)
        return Status::error("MPI_Comm_split failed on rank " +
                             std::to_string(rankId));
      return Status::ok();
    };
    if (size != ranks) {
      FSDP_RETURN_IF_ERROR(splitBy(Group::Shard, &shardComm));
      FSDP_RETURN_IF_ERROR(splitBy(Group::Replicate, &replicaComm));
    }
    if (block > 0)
      FSDP_RETURN_IF_ERROR(splitBy(Group::Block, &blockComm));
    return Status::ok();
  }
  int64_t rank(Group g) const override { return layout.position(rankId, g); }
  int64_t size(Group g) const override { return layout.size(g); }

  void reserve(int64_t slots) override { pending.assign(slots, Pending()); }
  Status allReduceStart(const void *in, void *out, int64_t count, Elem e,
                        bool average, int64_t slot, Group g) override {
    if (slot < 0 || slot >= (int64_t)pending.size())
      return Status::error("collective slot out of range");
    Pending &p = pending[slot];
    p = {MPI_REQUEST_NULL, out, count, average, size(g), e};
    int rc = MPI_Iallreduce(in == out ? MPI_IN_PLACE : in, out, (int)count,
                            type(e), sum(e), comm(g), &p.request);
    if (rc != MPI_SUCCESS)
      return Status::error("MPI_Iallreduce failed on rank " +
                           std::to_string(rankId));
    return Status::ok();
  }
  Status allGatherStart(const void *in, void *out, int64_t count,
                        int64_t elemBytes, int64_t slot, Group g) override {
    if (slot < 0 || slot >= (int64_t)pending.size())
      return Status::error("collective slot out of range");
    Pending &p = pending[slot];
    p = {MPI_REQUEST_NULL, nullptr, 0, false, size(g), Elem::F32};
    int bytes = (int)(count * elemBytes);
    if (MPI_Iallgather(in, bytes, MPI_BYTE, out, bytes, MPI_BYTE, comm(g),
                       &p.request) != MPI_SUCCESS)
      return Status::error("MPI_Iallgather failed on rank " +
                           std::to_string(rankId));
    return Status::ok();
  }
  Status reduceScatterStart(const void *in, void *out, int64_t count, Elem e,
                            bool average, int64_t slot, Group g) override {
    if (slot < 0 || slot >= (int64_t)pending.size())
      return Status::error("collective slot out of range");
    Pending &p = pending[slot];
    p = {MPI_REQUEST_NULL, out, count, average, size(g), e};
    if (MPI_Ireduce_scatter_block(in, out, (int)count, type(e), sum(e), comm(g),
                                  &p.request) != MPI_SUCCESS)
      return Status::error("MPI_Ireduce_scatter_block failed on rank " +
                           std::to_string(rankId));
    return Status::ok();
  }
  Status wait(int64_t slot) override {
    if (slot < 0 || slot >= (int64_t)pending.size())
      return Status::error("collective slot out of range");
    Pending &p = pending[slot];
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::duration<double>(timeout);
    int done = 0;
    while (true) {
      if (MPI_Test(&p.request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return Status::error("MPI_Test failed on rank " +
                             std::to_string(rankId));
      if (done)
        break;
      if (std::chrono::steady_clock::now() > deadline)
        return Status::error(
            "rank " + std::to_string(rankId) +
            ": a collective did not complete within " +
            std::to_string((int)timeout) +
            " s (a rank died or hung; --comm-timeout sets the limit)");
      std::this_thread::yield();
    }
    if (p.average)
      scaleElements(p.out, p.count, p.elem, 1.0f / (float)p.ranks);
    return Status::ok();
  }
  Status checkSame(uint64_t value, const std::string &what) override {
    uint64_t root = value;
    MPI_Bcast(&root, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    int mismatch = root != value, any = 0;
    MPI_Allreduce(&mismatch, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return sameAsRankZero(rankId, mismatch, any, what);
  }
  Status broadcast(void *data, int64_t bytes, const std::string &) override {
    if (MPI_Bcast(data, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
      return Status::error("MPI_Bcast failed on rank " +
                           std::to_string(rankId));
    return Status::ok();
  }
  void abort(int code) override { MPI_Abort(MPI_COMM_WORLD, code); }

private:
  struct Pending {
    MPI_Request request = MPI_REQUEST_NULL;
    void *out = nullptr;
    int64_t count = 0;
    bool average = false;
    int64_t ranks = 1; // of the group, for the average
    Elem elem = Elem::F32;
  };
  static MPI_Datatype type(Elem e) {
    return e == Elem::F32 ? MPI_FLOAT : MPI_UINT16_T;
  }
  MPI_Op sum(Elem e) const {
    return e == Elem::F32 ? MPI_SUM : e == Elem::BF16 ? bf16Sum : f16Sum;
  }
  MPI_Op bf16Sum = MPI_OP_NULL, f16Sum = MPI_OP_NULL;
  MPI_Comm comm(Group g) const {
    switch (g) {
    case Group::World:
      return MPI_COMM_WORLD;
    case Group::Shard:
      return shardComm;
    case Group::Replicate:
      return replicaComm;
    case Group::Block:
      return blockComm;
    }
    return MPI_COMM_WORLD;
  }
  double timeout;
  int64_t rankId = 0, ranks = 1;
  GroupLayout layout;
  MPI_Comm shardComm = MPI_COMM_WORLD, replicaComm = MPI_COMM_SELF,
           blockComm = MPI_COMM_SELF;
  std::vector<Pending> pending;
};

void finalizeMpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized)
    MPI_Finalize();
}

} // namespace

std::unique_ptr<Comm> localComm() { return std::make_unique<Local>(); }

Status sameAsRankZero(int64_t rank, bool mismatch, bool any,
                      const std::string &what) {
  if (!any)
    return Status::ok();
  return Status::error("rank " + std::to_string(rank) + ": " + what +
                       (mismatch ? " differs from rank 0's"
                                 : " differs between ranks (on another rank)"));
}

bool launchedByMpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") ||
         std::getenv("PMIX_RANK");
}

Status launchInfo(LaunchInfo &out) {
  out = LaunchInfo();
  auto read = [&](const char *name, int64_t &value, int64_t min) -> Status {
    const char *v = std::getenv(name);
    if (!v)
      return Status::ok();
    char *end = nullptr;
    long long x = std::strtoll(v, &end, 10);
    if (end == v || *end != '\0' || x < min)
      return Status::error(std::string("environment variable ") + name + "='" +
                           v + "' is not a valid number");
    value = x;
    return Status::ok();
  };
  if (std::getenv("WORLD_SIZE")) {
    out.launcher = "torchrun";
    FSDP_RETURN_IF_ERROR(read("WORLD_SIZE", out.size, 1));
    FSDP_RETURN_IF_ERROR(read("RANK", out.rank, 0));
    FSDP_RETURN_IF_ERROR(read("LOCAL_RANK", out.localRank, 0));
  } else if (std::getenv("SLURM_NTASKS")) {
    out.launcher = "slurm";
    FSDP_RETURN_IF_ERROR(read("SLURM_NTASKS", out.size, 1));
    FSDP_RETURN_IF_ERROR(read("SLURM_PROCID", out.rank, 0));
    FSDP_RETURN_IF_ERROR(read("SLURM_LOCALID", out.localRank, 0));
  }
  if (out.rank >= out.size)
    return Status::error(out.launcher + " gave rank " +
                         std::to_string(out.rank) + " of " +
                         std::to_string(out.size));
  return Status::ok();
}

Status checkLaunch(const LaunchInfo &launch, const Comm *comm) {
  if (launch.launcher.empty())
    return Status::ok();
  std::string what = launch.launcher + " (rank " + std::to_string(launch.rank) +
                     " of " + std::to_string(launch.size) + ")";
  if (!comm)
    return Status::ok();
  if (launch.rank != comm->rank() || launch.size != comm->size())
    return Status::error(what + " disagrees with MPI (rank " +
                         std::to_string(comm->rank()) + " of " +
                         std::to_string(comm->size()) + ")");
  return Status::ok();
}

Status mpiComm(double timeoutSeconds, std::unique_ptr<Comm> &out) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) !=
        MPI_SUCCESS)
      return Status::error("MPI_Init failed");
    std::atexit(finalizeMpi);
  }
  out = std::make_unique<Mpi>(timeoutSeconds);
  return Status::ok();
}

} // namespace fsdp
