//===- GlooComm.cpp - Collectives over Gloo for launches without MPI ------===//
//
// torchrun, Slurm's srun without PMIx, or a hand launch start one process
// per rank with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT and no MPI.
// The ranks meet through a c10d store (Store.h: torchrun's agent's, or one
// rank 0 serves). Ranks all on one host move data through shared memory,
// in the waits (HostChannel.h); otherwise they build Gloo contexts over
// TCP: ring all-reduce and all-gather from Gloo, and a ring reduce-scatter
// on Gloo's transport.
//
// Non-blocking collectives as the plan wants them: each group (world,
// shard, replicate, block) has two lanes, one for all-gathers and one for
// reductions, each a Gloo context with a thread of its own that runs its
// collectives in the order they start (every rank starts them in the same
// order, so lanes never deadlock). `wait` blocks until the lane has run the
// slot's collective. Gloo's own deadline on every operation is the
// communicator's timeout, and a closed connection (a dead rank) fails the
// operation at once, so nothing hangs.
//
//===----------------------------------------------------------------------===//
#include "runtime/comm/Comm.h"
#include "runtime/comm/HostChannel.h"
#include "runtime/comm/Reduce.h"
#include "runtime/comm/Store.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace fsdp {

namespace {

using Millis = std::chrono::milliseconds;

/// Gloo's view of the store: our keys under a prefix. Gloo reports errors
/// by exception; they are caught where contexts are made.
class GlooStore : public gloo::rendezvous::Store {
public:
  GlooStore(fsdp::Store &store, std::string prefix)
      : store(store), prefix(std::move(prefix)) {}
  void set(const std::string &key, const std::vector<char> &data) override {
    if (Status s =
            store.set(prefix + key, std::string(data.begin(), data.end()));
        !s)
      throw std::runtime_error(s.message());
  }
  std::vector<char> get(const std::string &key) override {
    std::string value;
    if (Status s = store.get(prefix + key, value); !s)
      throw std::runtime_error(s.message());
    return std::vector<char>(value.begin(), value.end());
  }
  void wait(const std::vector<std::string> &keys) override {
    for (const std::string &k : keys)
      get(k);
  }
  void wait(const std::vector<std::string> &keys, const Millis &) override {
    wait(keys); // the store's own deadline applies
  }

private:
  fsdp::Store &store;
  std::string prefix;
};

/// A collective's state between its start and its wait, and what its lane
/// runs: data, not a closure, so starting one allocates nothing
/// (--check-allocations).
struct Pending {
  enum class Op { AllGather, ReduceScatter, AllReduce };
  bool started = false, done = false;
  std::string error;
  const char *kind = ""; // "all_gather": with the group, for messages
  Group group = Group::World;
  Op op = Op::AllGather;
  const void *in = nullptr;
  void *out = nullptr;
  int64_t count = 0, ranks = 1;
  size_t bytes = 0;     // all-gather: each rank's part
  int64_t position = 0; // all-gather: this rank's place in the group
  bool average = false;
  Elem elem = Elem::F32;
};

/// One Gloo context and the thread that runs its collectives in order,
/// each with `execute` (set once).
class Lane {
public:
  using Execute = std::function<void(Lane &, Pending &)>;
  Lane(std::shared_ptr<gloo::Context> context, Execute execute)
      : context(std::move(context)), execute(std::move(execute)), ring(8) {
    worker = std::thread([this] { run(); });
  }
  ~Lane() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    worker.join();
  }
  void push(Pending *p) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (queued == ring.size()) { // grows to the most ever queued, once
        std::vector<Pending *> larger(ring.size() * 2);
        for (size_t i = 0; i < queued; ++i)
          larger[i] = ring[(head + i) % ring.size()];
        ring.swap(larger);
        head = 0;
      }
      ring[(head + queued++) % ring.size()] = p;
    }
    cv.notify_all();
  }
  std::shared_ptr<gloo::Context> context;
  std::vector<char> scratch; // the reduce-scatter's chunks (lane thread only)

private:
  void run() {
    for (;;) {
      Pending *p = nullptr;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stop || queued > 0; });
        if (queued == 0)
          return;
        p = ring[head];
        head = (head + 1) % ring.size();
        --queued;
      }
      execute(*this, *p);
    }
  }
  Execute execute;
  std::thread worker;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Pending *> ring; // queued collectives from head, in order
  size_t head = 0, queued = 0;
  bool stop = false;
};

const char *groupName(Group g) {
  switch (g) {
  case Group::World:
    return "world";
  case Group::Shard:
    return "shard";
  case Group::Replicate:
    return "replicate";
  case Group::Block:
    return "block";
  }
  return "?";
}

/// Ring reduce-scatter over Gloo's transport: in step s, position p sends
/// its running sum of chunk p-s-1 to p+1 and adds its own part of chunk
/// p-s-2 to what p-1 sent; after n-1 steps chunk p is complete at p.
void reduceScatterRing(Lane &lane, const void *in, void *out, int64_t count,
                       Elem e, Millis timeout) {
  gloo::Context &ctx = *lane.context;
  int n = ctx.size, p = ctx.rank;
  size_t chunk = (size_t)count * (size_t)elemBytes(e);
  const char *src = static_cast<const char *>(in);
  if (chunk == 0)
    return;
  if (lane.scratch.size() < 3 * chunk)
    lane.scratch.resize(3 * chunk);
  char *recvPtr = lane.scratch.data();
  char *accPtr[2] = {recvPtr + chunk, recvPtr + 2 * chunk};
  auto recvBuf = ctx.createUnboundBuffer(recvPtr, chunk);
  std::unique_ptr<gloo::transport::UnboundBuffer> acc[2] = {
      ctx.createUnboundBuffer(accPtr[0], chunk),
      ctx.createUnboundBuffer(accPtr[1], chunk)};
  auto inBuf = ctx.createUnboundBuffer(const_cast<char *>(src), n * chunk);
  int next = (p + 1) % n, prev = (p + n - 1) % n;
  const uint64_t slot = gloo::Slot::build(0x40, 0); // apart from Gloo's own
  for (int s = 0; s + 1 < n; ++s) {
    int sendChunk = ((p - s - 1) % n + n) % n;
    int recvChunk = ((p - s - 2) % n + n) % n;
    recvBuf->recv(prev, slot);
    gloo::transport::UnboundBuffer *sending =
        s == 0 ? inBuf.get() : acc[(s - 1) % 2].get();
    if (s == 0)
      sending->send(next, slot, (size_t)sendChunk * chunk, chunk);
    else
      sending->send(next, slot);
    if (!recvBuf->waitRecv(timeout))
      throw std::runtime_error("reduce-scatter receive aborted");
    void *dst = s + 2 == n ? out : accPtr[s % 2];
    sumElements(dst, recvPtr, src + (size_t)recvChunk * chunk, count, e);
    if (!sending->waitSend(timeout))
      throw std::runtime_error("reduce-scatter send aborted");
  }
}

class Gloo : public Comm {
public:
  Gloo(std::unique_ptr<StoreServer> server, std::unique_ptr<Store> store,
       std::string prefix, std::shared_ptr<gloo::transport::Device> device,
       std::unique_ptr<HostChannel> channel, int64_t rank, int64_t size,
       double timeout)
      : server(std::move(server)), store(std::move(store)),
        prefix(std::move(prefix)), device(std::move(device)),
        channel(std::move(channel)), rankId(rank), ranks(size),
        timeout(timeout) {
    layout.set(size, size, 0);
  }
  ~Gloo() override {
    lanes.clear(); // joins the lanes' threads before the store goes
  }

  /// The world's lanes; the other groups come with split().
  Status init() { return makeLanes(Group::World); }

  int64_t rank() const override { return rankId; }
  int64_t size() const override { return ranks; }
  Status split(int64_t shardSize, int64_t blockSize) override {
    FSDP_RETURN_IF_ERROR(layout.set(ranks, shardSize, blockSize));
    for (Group g : {Group::Shard, Group::Replicate, Group::Block})
      FSDP_RETURN_IF_ERROR(makeLanes(g));
    return Status::ok();
  }
  int64_t rank(Group g) const override { return layout.position(rankId, g); }
  int64_t size(Group g) const override { return layout.size(g); }
  void reserve(int64_t slots) override {
    std::lock_guard<std::mutex> lock(doneMu);
    pending.assign(slots, Pending());
  }

  Status allReduceStart(const void *in, void *out, int64_t count, Elem e,
                        bool average, int64_t slot, Group g) override {
    Pending *p = nullptr;
    FSDP_RETURN_IF_ERROR(begin(slot, "all_reduce", g, p));
    expectSum(*p, out, count, average, e, g);
    if (size(g) == 1)
      return alone(*p, in, out, count * elemBytes(e));
    p->op = Pending::Op::AllReduce;
    p->in = in;
    return launch(*p, g, /*gather=*/false);
  }

  Status allGatherStart(const void *in, void *out, int64_t count,
                        int64_t elemBytes, int64_t slot, Group g) override {
    Pending *p = nullptr;
    FSDP_RETURN_IF_ERROR(begin(slot, "all_gather", g, p));
    int64_t n = size(g), position = rank(g);
    size_t bytes = (size_t)(count * elemBytes);
    if (n == 1)
      return alone(*p, in, out, (int64_t)bytes);
    p->op = Pending::Op::AllGather;
    p->in = in;
    p->out = out;
    p->bytes = bytes;
    p->ranks = n;
    p->position = position;
    return launch(*p, g, /*gather=*/true);
  }

  Status reduceScatterStart(const void *in, void *out, int64_t count, Elem e,
                            bool average, int64_t slot, Group g) override {
    Pending *p = nullptr;
    FSDP_RETURN_IF_ERROR(begin(slot, "reduce_scatter", g, p));
    expectSum(*p, out, count, average, e, g);
    if (size(g) == 1)
      return alone(*p, in, out, count * elemBytes(e));
    p->op = Pending::Op::ReduceScatter;
    p->in = in;
    return launch(*p, g, /*gather=*/false);
  }

  Status wait(int64_t slot) override {
    if (slot < 0 || slot >= (int64_t)pending.size())
      return Status::error("collective slot out of range");
    return finish(pending[slot]);
  }

  Status checkSame(uint64_t value, const std::string &what) override {
    // Members, not locals: after a timeout the lane may still write them.
    std::vector<uint64_t> &all = checkAll;
    all.assign(ranks, 0);
    checkValue = value;
    Pending &p = checkPending;
    p = Pending();
    p.started = true;
    p.kind = "all_gather";
    if (ranks == 1)
      return Status::ok();
    p.op = Pending::Op::AllGather;
    p.in = &checkValue;
    p.out = all.data();
    p.bytes = sizeof checkValue;
    p.ranks = ranks;
    p.position = rankId;
    FSDP_RETURN_IF_ERROR(launch(p, Group::World, /*gather=*/false));
    if (Status s = finish(p); !s)
      return s.withContext("checking " + what);
    bool any = false;
    for (uint64_t v : all)
      any = any || v != all[0];
    return sameAsRankZero(rankId, all[0] != value, any, what);
  }

  Status broadcast(void *data, int64_t bytes, const std::string &key) override {
    std::string name = prefix + "broadcast/" + key;
    if (rankId == 0)
      return store->set(name, std::string(static_cast<char *>(data), bytes));
    std::string value;
    FSDP_RETURN_IF_ERROR(store->get(name, value));
    if ((int64_t)value.size() != bytes)
      return Status::error("rank 0 published " + std::to_string(value.size()) +
                           " bytes for '" + key + "', rank " +
                           std::to_string(rankId) + " expected " +
                           std::to_string(bytes));
    std::memcpy(data, value.data(), bytes);
    return Status::ok();
  }

  /// Gloo's lanes move data on threads of their own; the host channel in
  /// the wait, as MPI does.
  bool progressesAlone() const override { return !channel; }

  void abort(int code) override {
    std::fflush(nullptr);
    std::_Exit(code); // the peers see their connections close
  }

private:
  Millis millis() const { return Millis((int64_t)(timeout * 1000.0)); }

  /// What wait() needs to finish a sum: the average's scaling.
  void expectSum(Pending &p, void *out, int64_t count, bool average, Elem e,
                 Group g) {
    p.out = out;
    p.count = count;
    p.average = average;
    p.ranks = size(g);
    p.elem = e;
  }

  /// All-reduce buffers of element type T; in place when in == out.
  template <typename T>
  static void setBuffers(gloo::AllreduceOptions &opts, const T *in, T *out,
                         int64_t count) {
    if (in != out)
      opts.setInput(const_cast<T *>(in), (size_t)count);
    opts.setOutput(out, (size_t)count);
  }

  /// A group of one rank: the result is the rank's own data.
  Status alone(Pending &p, const void *in, void *out, int64_t bytes) {
    if (in != out)
      std::memmove(out, in, (size_t)bytes);
    std::lock_guard<std::mutex> lock(doneMu);
    p.done = true;
    return Status::ok();
  }

  /// "all_gather over the shard group" (built only for a message).
  static std::string describe(const Pending &p) {
    return std::string(p.kind) + " over the " + groupName(p.group) + " group";
  }

  /// The group whose lanes run g's collectives: a group spanning the world
  /// uses the world's.
  Group laneGroup(Group g) const {
    return layout.size(g) == ranks ? Group::World : g;
  }

  /// Builds group g's two lanes (collective over the ranks of g). A group
  /// of one rank has none.
  Status makeLanes(Group g) {
    if (channel) { // this rank's group of kind g, in group order
      std::vector<int64_t> &m = members[(int)g];
      m.assign(layout.size(g), -1);
      for (int64_t r = 0; r < ranks; ++r)
        if (layout.key(r, g) == layout.key(rankId, g))
          m[layout.position(r, g)] = r;
      return Status::ok();
    }
    if (layout.size(g) <= 1 || laneGroup(g) != g)
      return Status::ok();
    int64_t n = layout.size(g);
    for (int lane = 0; lane < 2; ++lane) {
      std::string scope = prefix + groupName(g) + "/" +
                          std::to_string(layout.key(rankId, g)) + "/" +
                          (lane ? "gather" : "reduce") + "/";
      GlooStore glooStore(*store, scope);
      try {
        auto ctx = std::make_shared<gloo::rendezvous::Context>(
            (int)layout.position(rankId, g), (int)n);
        ctx->setTimeout(millis());
        ctx->connectFullMesh(glooStore, device);
        lanes[{g, lane == 1}] = std::make_unique<Lane>(
            ctx, [this](Lane &l, Pending &p) { execute(l, p); });
      } catch (const std::exception &ex) {
        return Status::error("rank " + std::to_string(rankId) +
                             ": connecting the " + groupName(g) +
                             " group over Gloo failed: " + ex.what());
      }
    }
    return Status::ok();
  }

  Lane *laneFor(Group g, bool gather) {
    if (layout.size(g) <= 1)
      return nullptr;
    auto it = lanes.find({laneGroup(g), gather});
    return it == lanes.end() ? nullptr : it->second.get();
  }

  Status begin(int64_t slot, const char *kind, Group g, Pending *&p) {
    if (slot < 0 || slot >= (int64_t)pending.size())
      return Status::error("collective slot out of range");
    p = &pending[slot];
    std::lock_guard<std::mutex> lock(doneMu);
    if (p->started && !p->done)
      return Status::error(std::string(kind) + " started in slot " +
                           std::to_string(slot) +
                           " while its previous collective is unwaited");
    *p = Pending();
    p->started = true;
    p->kind = kind;
    p->group = g;
    return Status::ok();
  }

  /// Queues p on g's lane; `p` records when it is done.
  Status launch(Pending &p, Group g, bool gather) {
    if (channel)
      return Status::ok(); // run in the wait
    Lane *lane = laneFor(g, gather);
    if (!lane)
      return Status::error(describe(p) + ": the group was never connected");
    lane->push(&p);
    return Status::ok();
  }

  /// Runs p's collective on its lane's thread.
  void execute(Lane &lane, Pending &p) {
    std::string error;
    try {
      switch (p.op) {
      case Pending::Op::AllGather: {
        gloo::AllgatherOptions opts(lane.context);
        char *o = static_cast<char *>(p.out);
        // In place when this rank's part already sits at its offset.
        if (p.in != o + p.position * p.bytes)
          opts.setInput(const_cast<char *>(static_cast<const char *>(p.in)),
                        p.bytes);
        opts.setOutput(o, p.bytes * p.ranks);
        opts.setTimeout(millis());
        gloo::allgather(opts);
        break;
      }
      case Pending::Op::ReduceScatter:
        reduceScatterRing(lane, p.in, p.out, p.count, p.elem, millis());
        break;
      case Pending::Op::AllReduce: {
        gloo::AllreduceOptions opts(lane.context);
        if (p.elem == Elem::F32)
          setBuffers(opts, static_cast<const float *>(p.in),
                     static_cast<float *>(p.out), p.count);
        else
          setBuffers(opts, static_cast<const uint16_t *>(p.in),
                     static_cast<uint16_t *>(p.out), p.count);
        Elem e = p.elem;
        opts.setReduceFunction(
            [e](void *c, const void *a, const void *b, size_t n) {
              sumElements(c, a, b, (int64_t)n, e);
            });
        opts.setTimeout(millis());
        gloo::allreduce(opts);
        break;
      }
      }
    } catch (const std::exception &ex) {
      error = ex.what();
      if (error.empty())
        error = "failed";
    }
    {
      std::lock_guard<std::mutex> lock(doneMu);
      p.error = std::move(error);
      p.done = true;
    }
    doneCv.notify_all();
  }

  /// Runs p on the host channel (on this thread).
  void executeHere(Pending &p) {
    const std::vector<int64_t> &m = members[(int)p.group];
    int64_t position = layout.position(rankId, p.group);
    Status s = Status::ok();
    switch (p.op) {
    case Pending::Op::AllGather:
      s = channel->allGather(p.group, m, position, p.in, p.out, p.bytes);
      break;
    case Pending::Op::ReduceScatter:
      s = channel->reduceScatter(p.group, m, position, p.in, p.out, p.count,
                                 p.elem);
      break;
    case Pending::Op::AllReduce:
      s = channel->allReduce(p.group, m, position, p.in, p.out, p.count,
                             p.elem);
      break;
    }
    std::lock_guard<std::mutex> lock(doneMu);
    if (!s)
      p.error = s.message();
    p.done = true;
  }

  Status finish(Pending &p) {
    if (channel && p.started && !p.done)
      executeHere(p);
    std::unique_lock<std::mutex> lock(doneMu);
    if (!p.started)
      return Status::error("wait for a collective that never started");
    // Gloo gives up after the timeout; the margin covers the lane's queue.
    auto limit = std::chrono::duration<double>(timeout * 2 + 5);
    if (!doneCv.wait_for(lock, limit, [&] { return p.done; }))
      return Status::error("rank " + std::to_string(rankId) + ": " +
                           describe(p) + " did not complete within " +
                           std::to_string((int)timeout) +
                           " s (a rank died or hung; --comm-timeout sets the "
                           "limit)");
    p.started = false;
    if (!p.error.empty())
      return Status::error("rank " + std::to_string(rankId) + ": " +
                           describe(p) + " failed: " + p.error +
                           " (a rank died or hung; --comm-timeout sets the "
                           "limit)");
    if (p.average && p.out)
      scaleElements(p.out, p.count, p.elem, 1.0f / (float)p.ranks);
    return Status::ok();
  }

  std::unique_ptr<StoreServer> server; // rank 0's, when no agent runs one
  std::unique_ptr<Store> store;
  std::string prefix;
  std::shared_ptr<gloo::transport::Device> device;
  std::unique_ptr<HostChannel> channel; // ranks on one host: no lanes
  std::vector<int64_t> members[4];      // by Group: its world ranks
  int64_t rankId, ranks;
  double timeout;
  GroupLayout layout;
  std::map<std::pair<Group, bool>, std::unique_ptr<Lane>> lanes;
  std::vector<Pending> pending;
  Pending checkPending;
  uint64_t checkValue = 0;
  std::vector<uint64_t> checkAll;
  std::mutex doneMu;
  std::condition_variable doneCv;
};

/// The address this host reaches `host` from (the interface Gloo should
/// listen on): a UDP socket's local end after connect(), which sends nothing.
std::string localAddressToward(const std::string &host) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_DGRAM;
  if (::getaddrinfo(host.c_str(), "9", &hints, &res) != 0 || !res)
    return "";
  std::string found;
  int fd = ::socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    char text[INET6_ADDRSTRLEN] = {};
    if (::getsockname(fd, reinterpret_cast<sockaddr *>(&local), &len) == 0) {
      const void *addr =
          local.ss_family == AF_INET6
              ? (const void *)&reinterpret_cast<sockaddr_in6 *>(&local)
                    ->sin6_addr
              : (const void *)&reinterpret_cast<sockaddr_in *>(&local)
                    ->sin_addr;
      if (::inet_ntop(local.ss_family, addr, text, sizeof text))
        found = text;
    }
  }
  if (fd >= 0)
    ::close(fd);
  ::freeaddrinfo(res);
  return found;
}

Status portFrom(const char *name, const char *text, int &port) {
  char *end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 1 || v > 65535)
    return Status::error(std::string("environment variable ") + name + "='" +
                         text + "' is not a TCP port (1 to 65535)");
  port = (int)v;
  return Status::ok();
}

} // namespace

Status glooComm(const LaunchInfo &launch, double timeoutSeconds,
                std::unique_ptr<Comm> &out) {
  // Gloo's TCP pairs write with writev, which raises SIGPIPE when the peer
  // has closed its end (a rank that died): ignored, the write fails with
  // EPIPE, Gloo throws and this rank reports the lost peer, instead of
  // dying by the signal with nothing said (a flake of data-parallel-mpi's
  // "a rank dies" case under load, seen as signal 13).
  std::signal(SIGPIPE, SIG_IGN);
  std::string who = launch.launcher + " (rank " + std::to_string(launch.rank) +
                    " of " + std::to_string(launch.size) + ")";
  const char *host = std::getenv("MASTER_ADDR");
  const char *masterPort = std::getenv("MASTER_PORT");
  const char *ownPort = std::getenv("FSDP_STORE_PORT");
  if (!host || !*host || (!masterPort && !ownPort))
    return Status::error(who +
                         " started this process outside MPI without "
                         "MASTER_ADDR and MASTER_PORT: launch with torchrun, "
                         "mpirun -np " +
                         std::to_string(launch.size) + " or srun --mpi=pmix");
  // Whose store: torchrun's agent serves one at MASTER_PORT under its
  // static rendezvous (TORCHELASTIC_USE_AGENT_STORE=True); otherwise rank 0
  // serves one there, or at FSDP_STORE_PORT when that is set.
  const char *agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  bool useAgent = !ownPort && agent && std::strcmp(agent, "True") == 0;
  int port = 0;
  FSDP_RETURN_IF_ERROR(ownPort ? portFrom("FSDP_STORE_PORT", ownPort, port)
                               : portFrom("MASTER_PORT", masterPort, port));
  std::unique_ptr<StoreServer> server;
  if (!useAgent && launch.rank == 0)
    FSDP_RETURN_IF_ERROR(StoreServer::start(port, server));
  std::unique_ptr<Store> store;
  if (Status s = Store::connect(host, port, timeoutSeconds, store); !s)
    return s.withContext(who);

  // Keys live under the launch attempt and a per-rank count of runs, so a
  // worker that runs fsdp-run twice, or a restarted attempt, never reads a
  // key an earlier run left.
  std::string prefix = "/fsdp/";
  if (useAgent) {
    const char *attempt = std::getenv("TORCHELASTIC_RESTART_COUNT");
    prefix += std::string("attempt_") + (attempt ? attempt : "0") + "/";
  }
  int64_t run = 0;
  if (Status s =
          store->add(prefix + "runs/" + std::to_string(launch.rank), 1, run);
      !s)
    return s.withContext(who);
  prefix += "run_" + std::to_string(run) + "/";
  // Every rank must be of the same job: the world sizes agree.
  FSDP_RETURN_IF_ERROR(
      store->set(prefix + "size/" + std::to_string(launch.rank),
                 std::to_string(launch.size)));
  auto sizeOf = [&](int64_t r, std::string &v) -> Status {
    if (Status s = store->get(prefix + "size/" + std::to_string(r), v); !s)
      return Status::error(who + ": rank " + std::to_string(r) +
                           " never joined: " + s.message());
    return Status::ok();
  };
  std::string mine = std::to_string(launch.size), theirs;
  for (int64_t r = launch.rank == 0 ? 1 : 0;
       r < (launch.rank == 0 ? launch.size : 1); ++r) {
    FSDP_RETURN_IF_ERROR(sizeOf(r, theirs));
    if (theirs != mine)
      return Status::error(who + ": rank " + std::to_string(r) +
                           " was launched with WORLD_SIZE=" +
                           theirs.substr(0, 20) + ", this rank with " + mine);
  }

  gloo::transport::tcp::attr attr;
  if (const char *iface = std::getenv("GLOO_SOCKET_IFNAME"); iface && *iface)
    attr.iface = iface;
  else
    attr.hostname = localAddressToward(host);
  if (attr.iface.empty() && attr.hostname.empty())
    attr.hostname = "127.0.0.1";
  std::shared_ptr<gloo::transport::Device> device;
  try {
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception &ex) {
    return Status::error(
        who + ": Gloo cannot open its TCP device (" +
        (attr.iface.empty() ? attr.hostname : "interface " + attr.iface) +
        "; GLOO_SOCKET_IFNAME picks one): " + ex.what());
  }
  // Ranks all on this host meet in shared memory (HostChannel.h) unless
  // FSDP_GLOO_SHM=0; every rank must have mapped it, or none uses it.
  std::unique_ptr<HostChannel> channel;
  const char *shm = std::getenv("FSDP_GLOO_SHM");
  bool same = false;
  if (launch.size > 1 && !(shm && std::strcmp(shm, "0") == 0)) {
    FSDP_RETURN_IF_ERROR(
        HostChannel::sameHost(*store, prefix, launch.rank, launch.size, same)
            .withContext(who));
    if (same) {
      if (Status s = HostChannel::open(*store, prefix, launch.rank, launch.size,
                                       timeoutSeconds, channel);
          !s)
        std::fprintf(stderr,
                     "fsdp-run: rank %lld: no shared memory between the "
                     "ranks (%s): collectives over TCP\n",
                     (long long)launch.rank, s.message().c_str());
      FSDP_RETURN_IF_ERROR(
          store->set(prefix + "shm-ok/" + std::to_string(launch.rank),
                     channel ? "1" : "0"));
      bool all = true;
      for (int64_t r = 0; r < launch.size; ++r) {
        std::string ok;
        FSDP_RETURN_IF_ERROR(
            store->get(prefix + "shm-ok/" + std::to_string(r), ok));
        all = all && ok == "1";
      }
      if (!all)
        channel.reset();
    }
  }
  auto comm = std::make_unique<Gloo>(
      std::move(server), std::move(store), prefix, std::move(device),
      std::move(channel), launch.rank, launch.size, timeoutSeconds);
  FSDP_RETURN_IF_ERROR(comm->init());
  out = std::move(comm);
  return Status::ok();
}

} // namespace fsdp
