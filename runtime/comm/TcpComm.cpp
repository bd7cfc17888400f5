//===- TcpComm.cpp - Collectives over TCP for launches without MPI --------===//
//
// torchrun (and the like) start one process per rank with RANK, WORLD_SIZE,
// MASTER_ADDR and MASTER_PORT and no MPI. This backend connects every rank
// to rank 0 (a star) and runs each collective there: every rank sends its
// buffer, rank 0 computes each group's result (sum, concatenation or
// scattered sum, in rank order) and sends every rank its part. Collectives
// complete at their start (wait is a no-op), so there is no overlap: it
// exists to run plans anywhere, not to be fast. Every send and receive has
// the communicator's deadline, and a closed connection (a dead rank) is an
// error, so nothing hangs.
//
// torchrun's own store listens on MASTER_PORT, so rank 0 listens on
// MASTER_PORT + 1 (or FSDP_PORT when set).
//
//===----------------------------------------------------------------------===//
#include "runtime/comm/Comm.h"
#include "runtime/support/Half.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

namespace fsdp {

namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(seconds));
}

enum class Op : uint8_t { AllReduce, AllGather, ReduceScatter, Check };

struct Header {
  uint8_t op, group, elem, average;
  int64_t count;
  uint64_t value; // checkSame
};

/// What a rank sends rank 0 on connecting, and rank 0 answers.
constexpr char kMagic[8] = {'f', 's', 'd', 'p', 't', 'c', 'p', '1'};
struct Hello {
  char magic[8];
  int64_t rank, size;
};
/// How long a connection may take to identify itself, and how many may be
/// unidentified at once.
constexpr double kHelloSeconds = 5.0;
constexpr size_t kMaxPending = 64;

class Tcp : public Comm {
public:
  Tcp(int64_t rank, int64_t size, double timeout)
      : rankId(rank), ranks(size), timeout(timeout) {
    layout.set(size, size, 0);
  }
  ~Tcp() override {
    for (int fd : fds)
      if (fd >= 0)
        ::close(fd);
  }

  Status connect(const std::string &host, int port) {
    Clock::time_point deadline = after(timeout);
    fds.assign(ranks, -1);
    if (rankId == 0) {
      int server = ::socket(AF_INET, SOCK_STREAM, 0);
      int one = 1;
      ::setsockopt(server, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_ANY);
      addr.sin_port = htons((uint16_t)port);
      if (server < 0 ||
          ::bind(server, reinterpret_cast<sockaddr *>(&addr), sizeof addr) ||
          ::listen(server, (int)ranks)) {
        if (server >= 0)
          ::close(server);
        return Status::error("rank 0 cannot listen on port " +
                             std::to_string(port) + ": " +
                             std::strerror(errno));
      }
      // Connections are identified concurrently: a peer that connects and
      // says nothing (a port scan, a stray client) or says something else
      // is dropped after kHelloSeconds without holding up the real ranks.
      struct Pending {
        int fd;
        Hello hello;
        size_t got;
        Clock::time_point until;
      };
      std::vector<Pending> pending;
      auto drop = [&](size_t k) {
        ::close(pending[k].fd);
        pending.erase(pending.begin() + (long)k);
      };
      for (int64_t accepted = 1; accepted < ranks;) {
        if (Clock::now() > deadline) {
          for (const Pending &q : pending)
            ::close(q.fd);
          ::close(server);
          return Status::error("rank 0: only " + std::to_string(accepted) +
                               " of " + std::to_string(ranks) +
                               " ranks connected within the timeout");
        }
        std::vector<pollfd> polled{{server, POLLIN, 0}};
        for (const Pending &q : pending)
          polled.push_back({q.fd, POLLIN, 0});
        if (::poll(polled.data(), polled.size(), 50) < 0 && errno != EINTR)
          continue;
        // Newest connections last; identify before accepting more.
        for (size_t k = pending.size(); k-- > 0;) {
          Pending &q = pending[k];
          if (polled[k + 1].revents) {
            ssize_t n = ::recv(q.fd, reinterpret_cast<char *>(&q.hello) + q.got,
                               sizeof(Hello) - q.got, MSG_DONTWAIT);
            if (n <= 0 && !(n < 0 && (errno == EAGAIN || errno == EINTR))) {
              drop(k);
              continue;
            }
            q.got += n > 0 ? size_t(n) : 0;
          }
          if (q.got < sizeof(Hello)) {
            if (Clock::now() > q.until)
              drop(k);
            continue;
          }
          int64_t who = q.hello.rank;
          if (std::memcmp(q.hello.magic, kMagic, sizeof kMagic) != 0 ||
              q.hello.size != ranks || who < 1 || who >= ranks ||
              fds[who] >= 0) {
            drop(k);
            continue;
          }
          Hello reply = hello(0);
          if (!sendAll(q.fd, &reply, sizeof reply, deadline)) {
            drop(k);
            continue;
          }
          tune(q.fd);
          fds[who] = q.fd;
          pending.erase(pending.begin() + (long)k);
          ++accepted;
        }
        if (polled[0].revents & POLLIN) {
          int fd = ::accept(server, nullptr, nullptr);
          if (fd >= 0) {
            if (pending.size() >= kMaxPending) // the oldest goes first
              drop(0);
            pending.push_back({fd, Hello{}, 0, after(kHelloSeconds)});
          }
        }
      }
      ::close(server);
      return Status::ok();
    }
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints,
                      &res) != 0 ||
        !res)
      return Status::error("cannot resolve MASTER_ADDR '" + host + "'");
    int fd = -1;
    while (true) {
      fd = ::socket(AF_INET, SOCK_STREAM, 0);
      if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0)
        break;
      if (fd >= 0)
        ::close(fd);
      fd = -1;
      if (Clock::now() > deadline)
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::freeaddrinfo(res);
    if (fd < 0)
      return Status::error("rank " + std::to_string(rankId) +
                           ": cannot connect to rank 0 at " + host + ":" +
                           std::to_string(port) + " within the timeout");
    tune(fd);
    fds[0] = fd;
    // Rank 0 answers once it has identified this rank: what listens there
    // is fsdp's rank 0 of a job this size, not something else.
    Hello mine = hello(rankId), reply{};
    if (!sendAll(fd, &mine, sizeof mine, deadline) ||
        !recvAll(fd, &reply, sizeof reply, deadline))
      return lost(0);
    if (std::memcmp(reply.magic, kMagic, sizeof kMagic) != 0 ||
        reply.size != ranks)
      return Status::error("rank " + std::to_string(rankId) + ": " + host +
                           ":" + std::to_string(port) +
                           " is not rank 0 of this job (a job of another "
                           "size, or another program, listens there)");
    return Status::ok();
  }

  int64_t rank() const override { return rankId; }
  int64_t size() const override { return ranks; }
  Status split(int64_t shard, int64_t block) override {
    return layout.set(ranks, shard, block);
  }
  int64_t rank(Group g) const override { return layout.position(rankId, g); }
  int64_t size(Group g) const override { return layout.size(g); }
  void reserve(int64_t) override {}

  Status allReduceStart(const void *in, void *out, int64_t count, Elem e,
                        bool average, int64_t, Group g) override {
    return run(Op::AllReduce, in, count, out, count, e, average, g);
  }
  Status allGatherStart(const void *in, void *out, int64_t count,
                        int64_t elemBytes, int64_t, Group g) override {
    // Bytes of any type: gathered as 16-bit or 32-bit words.
    Elem e = elemBytes == 4 ? Elem::F32 : Elem::BF16;
    if (elemBytes != 4 && elemBytes != 2)
      return Status::error("TCP all-gather of " + std::to_string(elemBytes) +
                           "-byte elements");
    return run(Op::AllGather, in, count, out, count * size(g), e, false, g);
  }
  Status reduceScatterStart(const void *in, void *out, int64_t count, Elem e,
                            bool average, int64_t, Group g) override {
    return run(Op::ReduceScatter, in, count * size(g), out, count, e, average,
               g);
  }
  Status wait(int64_t) override { return Status::ok(); }

  Status checkSame(uint64_t value, const std::string &what) override {
    Clock::time_point deadline = after(timeout);
    uint8_t mine = 0, any = 0;
    if (rankId == 0) {
      std::vector<uint8_t> differs(ranks, 0);
      for (int64_t r = 1; r < ranks; ++r) {
        Header h{};
        if (!recvAll(fds[r], &h, sizeof h, deadline))
          return lost(r);
        differs[r] = h.value != value;
        any |= differs[r];
      }
      for (int64_t r = 1; r < ranks; ++r) {
        uint8_t reply[2] = {differs[r], any};
        if (!sendAll(fds[r], reply, 2, deadline))
          return lost(r);
      }
    } else {
      Header h{(uint8_t)Op::Check, 0, 0, 0, 0, value};
      uint8_t reply[2];
      if (!sendAll(fds[0], &h, sizeof h, deadline) ||
          !recvAll(fds[0], reply, 2, deadline))
        return lost(0);
      mine = reply[0];
      any = reply[1];
    }
    if (any)
      return Status::error("rank " + std::to_string(rankId) + ": " + what +
                           (mine ? " differs from rank 0's"
                                 : " differs between ranks (on another rank)"));
    return Status::ok();
  }
  void abort(int code) override {
    for (int &fd : fds)
      if (fd >= 0)
        ::close(fd), fd = -1;
    std::_Exit(code);
  }

private:
  int64_t rankId, ranks;
  double timeout;
  GroupLayout layout;
  std::vector<int> fds;

  Hello hello(int64_t rank) const {
    Hello h{};
    std::memcpy(h.magic, kMagic, sizeof kMagic);
    h.rank = rank;
    h.size = ranks;
    return h;
  }

  static void tune(int fd) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }

  Status lost(int64_t peer) const {
    return Status::error("rank " + std::to_string(rankId) +
                         ": the connection to rank " + std::to_string(peer) +
                         " failed or timed out (a rank died or hung; "
                         "--comm-timeout sets the limit)");
  }

  bool io(int fd, void *data, size_t n, Clock::time_point deadline,
          bool send) const {
    char *p = static_cast<char *>(data);
    while (n > 0) {
      int ms = (int)std::chrono::duration_cast<std::chrono::milliseconds>(
                   deadline - Clock::now())
                   .count();
      if (ms <= 0)
        return false;
      pollfd pfd{fd, (short)(send ? POLLOUT : POLLIN), 0};
      if (::poll(&pfd, 1, std::min(ms, 1000)) <= 0)
        continue;
      ssize_t k = send ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
      if (k <= 0)
        return false;
      p += k;
      n -= (size_t)k;
    }
    return true;
  }
  bool sendAll(int fd, const void *data, size_t n,
               Clock::time_point deadline) const {
    return io(fd, const_cast<void *>(data), n, deadline, true);
  }
  bool recvAll(int fd, void *data, size_t n, Clock::time_point deadline) const {
    return io(fd, data, n, deadline, false);
  }

  static float load(const void *p, int64_t i, Elem e) {
    if (e == Elem::F32)
      return static_cast<const float *>(p)[i];
    uint16_t h = static_cast<const uint16_t *>(p)[i];
    return e == Elem::BF16 ? floatFromBf16(h) : floatFromF16(h);
  }
  static void store(void *p, int64_t i, Elem e, float v) {
    if (e == Elem::F32)
      static_cast<float *>(p)[i] = v;
    else
      static_cast<uint16_t *>(p)[i] =
          e == Elem::BF16 ? bf16FromFloat(v) : f16FromFloat(v);
  }

  /// One collective: `in` holds inCount elements, `out` receives outCount.
  Status run(Op op, const void *in, int64_t inCount, void *out,
             int64_t outCount, Elem e, bool average, Group g) {
    Clock::time_point deadline = after(timeout);
    size_t width = (size_t)elemBytes(e);
    if (rankId != 0) {
      Header h{(uint8_t)op, (uint8_t)g, (uint8_t)e, average, inCount, 0};
      if (!sendAll(fds[0], &h, sizeof h, deadline) ||
          !sendAll(fds[0], in, inCount * width, deadline) ||
          !recvAll(fds[0], out, outCount * width, deadline))
        return lost(0);
      return Status::ok();
    }
    // Rank 0: every rank's buffer, in rank order.
    std::vector<std::vector<char>> bufs(ranks);
    bufs[0].assign(static_cast<const char *>(in),
                   static_cast<const char *>(in) + inCount * width);
    for (int64_t r = 1; r < ranks; ++r) {
      Header h{};
      if (!recvAll(fds[r], &h, sizeof h, deadline))
        return lost(r);
      if (h.op != (uint8_t)op || h.group != (uint8_t)g ||
          h.elem != (uint8_t)e || h.count != inCount)
        return Status::error("rank " + std::to_string(r) +
                             " issued a different collective than rank 0");
      bufs[r].resize(inCount * width);
      if (!recvAll(fds[r], bufs[r].data(), bufs[r].size(), deadline))
        return lost(r);
    }
    // Each group's members, by position.
    std::map<int64_t, std::vector<int64_t>> groups;
    for (int64_t r = 0; r < ranks; ++r)
      groups[layout.key(r, g)].push_back(r);
    std::vector<char> result;
    for (int64_t r = 0; r < ranks; ++r) {
      const std::vector<int64_t> &members = groups[layout.key(r, g)];
      int64_t n = (int64_t)members.size();
      result.assign(outCount * width, 0);
      if (op == Op::AllGather) {
        for (int64_t m = 0; m < n; ++m)
          std::memcpy(result.data() + m * inCount * width,
                      bufs[members[m]].data(), inCount * width);
      } else {
        // Sum (of the whole buffer, or of this rank's chunk) in f32.
        int64_t offset =
            op == Op::ReduceScatter ? layout.position(r, g) * outCount : 0;
        for (int64_t i = 0; i < outCount; ++i) {
          float acc = 0;
          for (int64_t m : members)
            acc += load(bufs[m].data(), offset + i, e);
          store(result.data(), i, e, average ? acc / (float)n : acc);
        }
      }
      if (r == 0)
        std::memcpy(out, result.data(), result.size());
      else if (!sendAll(fds[r], result.data(), result.size(), deadline))
        return lost(r);
    }
    return Status::ok();
  }
};

} // namespace

Status tcpComm(const LaunchInfo &launch, double timeoutSeconds,
               std::unique_ptr<Comm> &out) {
  const char *host = std::getenv("MASTER_ADDR");
  const char *masterPort = std::getenv("MASTER_PORT");
  const char *own = std::getenv("FSDP_PORT");
  if (!host || (!masterPort && !own))
    return Status::error(launch.launcher + " (rank " +
                         std::to_string(launch.rank) + " of " +
                         std::to_string(launch.size) +
                         ") started this process outside MPI without "
                         "MASTER_ADDR and MASTER_PORT: launch with torchrun, "
                         "mpirun -np " +
                         std::to_string(launch.size) + " or srun --mpi=pmix");
  int port = own ? std::atoi(own) : std::atoi(masterPort) + 1;
  if (port <= 0 || port > 65535)
    return Status::error("the TCP port " + std::to_string(port) +
                         " (MASTER_PORT + 1, or FSDP_PORT) is out of range");
  auto tcp = std::make_unique<Tcp>(launch.rank, launch.size, timeoutSeconds);
  FSDP_RETURN_IF_ERROR(tcp->connect(host, port));
  out = std::move(tcp);
  return Status::ok();
}

} // namespace fsdp
