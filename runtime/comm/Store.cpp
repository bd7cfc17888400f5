//===- Store.cpp - A c10d TCPStore client and server ----------------------===//
//
// The wire format (torch 1.13, torch/csrc/distributed/c10d/TCPStore.cpp):
// a request is a one-byte query type followed by its fields; a string or a
// value is a 64-bit length and its bytes; integers are 64-bit, in the
// host's byte order (both ends are x86-64 or aarch64, little-endian).
//
//   SET  key value          -> nothing
//   GET  key                -> value (the key must exist: WAIT first)
//   ADD  key int64          -> int64, the new sum (kept as decimal text)
//   CHECK n key...          -> u8: 0 ready, 1 not ready
//   WAIT n key...           -> u8 0, once every key exists
//   GETNUMKEYS              -> int64
//   DELETE_KEY key          -> int64, keys deleted
//
//===----------------------------------------------------------------------===//
#include "runtime/comm/Store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>

namespace fsdp {

namespace {

enum Query : uint8_t {
  kSet = 0,
  kCompareSet = 1,
  kGet = 2,
  kAdd = 3,
  kCheck = 4,
  kWait = 5,
  kNumKeys = 6,
  kWatchKey = 7,
  kDeleteKey = 8,
};

/// torch 2.x's TCPStore (TCPStoreBackend.hpp) numbers its queries from a
/// VALIDATE at 0, the rest one higher than 1.13's (SET 1 ... GETNUMKEYS 7),
/// and a client opens with VALIDATE and this number.
constexpr uint32_t kValidationMagic = 0x3C85F7CE;

using Clock = std::chrono::steady_clock;

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(seconds));
}

/// Moves n bytes over fd before the deadline; false on a closed connection,
/// an error or the deadline.
bool io(int fd, void *data, size_t n, Clock::time_point deadline, bool send) {
  if (fd < 0) // closed after an earlier failure
    return false;
  char *p = static_cast<char *>(data);
  while (n > 0) {
    int ms = (int)std::chrono::duration_cast<std::chrono::milliseconds>(
                 deadline - Clock::now())
                 .count();
    if (ms <= 0)
      return false;
    pollfd pfd{fd, (short)(send ? POLLOUT : POLLIN), 0};
    int ready = ::poll(&pfd, 1, std::min(ms, 1000));
    if (ready < 0 && errno != EINTR)
      return false;
    if (ready <= 0)
      continue;
    ssize_t k = send ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (k <= 0)
      return false;
    p += k;
    n -= (size_t)k;
  }
  return true;
}

void appendU64(std::string &out, uint64_t v) {
  out.append(reinterpret_cast<const char *>(&v), sizeof v);
}
void appendString(std::string &out, const std::string &s) {
  appendU64(out, s.size());
  out += s;
}

} // namespace

//===----------------------------------------------------------------------===//
// Client
//===----------------------------------------------------------------------===//

Store::~Store() {
  if (fd >= 0)
    ::close(fd);
}

Status Store::connect(const std::string &host, int port, double timeoutSeconds,
                      std::unique_ptr<Store> &out) {
  std::string where = host + ":" + std::to_string(port);
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(),
                             &hints, &res);
      rc != 0)
    return Status::error("cannot resolve the store's address '" + host +
                         "': " + ::gai_strerror(rc));
  Clock::time_point deadline = after(timeoutSeconds);
  std::string lastError = "no address";
  int fd = -1;
  while (fd < 0 && Clock::now() < deadline) {
    for (addrinfo *a = res; a && fd < 0; a = a->ai_next) {
      int s = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC,
                       a->ai_protocol);
      if (s < 0)
        continue;
      if (::connect(s, a->ai_addr, a->ai_addrlen) == 0) {
        fd = s;
        break;
      }
      lastError = std::strerror(errno);
      ::close(s);
    }
    if (fd < 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (fd < 0) {
    ::freeaddrinfo(res);
    return Status::error("cannot reach the store at " + where + " within " +
                         std::to_string((int)timeoutSeconds) +
                         " s: " + lastError);
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  // Which protocol: a 1.13 store answers CHECK of no keys (0x04, count 0)
  // with READY at once. torch 2.x's reads 0x04 as an ADD and waits for its
  // key and delta (it would read 1.13's queries as others), so no answer
  // within the probe's time means 2.x: the half-sent request dies with
  // that connection, and a new one opens with VALIDATE. The other order
  // is not safe: a 1.13 store reads VALIDATE as a SET of a huge key.
  std::string probe(1, (char)kCheck);
  appendU64(probe, 0);
  uint8_t ready = 0xff;
  Clock::time_point probeEnd = std::min(deadline, after(kProbeSeconds));
  bool v113 = io(fd, probe.data(), probe.size(), probeEnd, true) &&
              io(fd, &ready, 1, probeEnd, false) && ready == 0;
  uint8_t shift = 0;
  if (!v113) {
    ::close(fd);
    fd = -1;
    for (addrinfo *a = res; a && fd < 0; a = a->ai_next) {
      int s = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC,
                       a->ai_protocol);
      if (s >= 0 && ::connect(s, a->ai_addr, a->ai_addrlen) == 0)
        fd = s;
      else if (s >= 0)
        ::close(s);
    }
    std::string hello(1, '\0');
    uint32_t magic = kValidationMagic;
    hello.append(reinterpret_cast<const char *>(&magic), 4);
    if (fd < 0 || !io(fd, hello.data(), hello.size(), deadline, true)) {
      if (fd >= 0)
        ::close(fd);
      ::freeaddrinfo(res);
      return Status::error("the store at " + where +
                           " answers neither torch 1.13's TCPStore protocol "
                           "nor accepts torch 2.x's");
    }
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    shift = 1;
  }
  ::freeaddrinfo(res);
  out.reset(new Store(fd, where, timeoutSeconds, shift));
  return Status::ok();
}

Status Store::lost(const std::string &what) {
  // A request half done leaves the connection out of step (a late answer
  // would be read as the next one's): later calls fail at once.
  if (fd >= 0) {
    ::close(fd);
    fd = -1;
  }
  return Status::error(
      "the store at " + where + " did not answer " + what + " within " +
      std::to_string((int)timeout) +
      " s, or closed the connection (a rank that never came, or a store "
      "that speaks neither torch 1.13's nor torch 2.x's TCPStore protocol; "
      "--comm-timeout sets the limit)");
}

Status Store::set(const std::string &key, const std::string &value) {
  std::lock_guard<std::mutex> lock(mu);
  std::string msg(1, (char)(kSet + shift));
  appendString(msg, key);
  appendString(msg, value);
  if (!io(fd, msg.data(), msg.size(), after(timeout), true))
    return lost("set '" + key + "'");
  return Status::ok();
}

Status Store::get(const std::string &key, std::string &value) {
  std::lock_guard<std::mutex> lock(mu);
  Clock::time_point deadline = after(timeout);
  std::string msg(1, (char)(kWait + shift));
  appendU64(msg, 1);
  appendString(msg, key);
  uint8_t done = 0xff;
  if (!io(fd, msg.data(), msg.size(), deadline, true) ||
      !io(fd, &done, 1, deadline, false) || done != 0)
    return lost("'" + key + "'");
  msg.assign(1, (char)(kGet + shift));
  appendString(msg, key);
  uint64_t size = 0;
  if (!io(fd, msg.data(), msg.size(), deadline, true) ||
      !io(fd, &size, sizeof size, deadline, false))
    return lost("'" + key + "'");
  if (size > StoreServer::kMaxValueBytes)
    return Status::error("the store at " + where + " sent " +
                         std::to_string(size) + " bytes for '" + key +
                         "' (at most " +
                         std::to_string(StoreServer::kMaxValueBytes) + ")");
  value.resize(size);
  if (!io(fd, value.data(), size, deadline, false))
    return lost("'" + key + "'");
  return Status::ok();
}

Status Store::add(const std::string &key, int64_t delta, int64_t &result) {
  std::lock_guard<std::mutex> lock(mu);
  Clock::time_point deadline = after(timeout);
  std::string msg(1, (char)(kAdd + shift));
  appendString(msg, key);
  appendU64(msg, (uint64_t)delta);
  if (!io(fd, msg.data(), msg.size(), deadline, true) ||
      !io(fd, &result, sizeof result, deadline, false))
    return lost("add '" + key + "'");
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Server
//===----------------------------------------------------------------------===//

namespace {

struct Connection {
  int fd;
  std::string in, out;
  std::vector<std::string> waiting; // keys of a WAIT not yet answered
  bool dead = false;                // closed at the end of the turn
};

/// Reads a request from the front of `in`. Returns 1 with the request
/// consumed, 0 when more bytes are needed, -1 when the request is malformed
/// or over the limits (the connection is closed).
class Parser {
public:
  explicit Parser(const std::string &in) : in(in) {}
  bool u8(uint8_t &v) {
    if (at + 1 > in.size())
      return false;
    v = (uint8_t)in[at++];
    return true;
  }
  bool u64(uint64_t &v) {
    if (at + 8 > in.size())
      return false;
    std::memcpy(&v, in.data() + at, 8);
    at += 8;
    return true;
  }
  /// -1: over `limit`.
  int bytes(std::string &v, uint64_t limit) {
    uint64_t n = 0;
    if (!u64(n))
      return 0;
    if (n > limit)
      return -1;
    if (at + n > in.size())
      return 0;
    v.assign(in.data() + at, n);
    at += n;
    return 1;
  }
  size_t at = 0;

private:
  const std::string &in;
};

} // namespace

StoreServer::~StoreServer() {
  if (wakeWrite >= 0) {
    char c = 0;
    (void)!::write(wakeWrite, &c, 1);
  }
  if (thread.joinable())
    thread.join();
  for (int fd : {listenFd, wakeRead, wakeWrite})
    if (fd >= 0)
      ::close(fd);
}

Status StoreServer::start(int port, std::unique_ptr<StoreServer> &out) {
  std::unique_ptr<StoreServer> s(new StoreServer());
  int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  bool v6 = fd >= 0;
  if (!v6)
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return Status::error(std::string("cannot open the store's socket: ") +
                         std::strerror(errno));
  s->listenFd = fd;
  int one = 1, zero = 0;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc;
  if (v6) {
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons((uint16_t)port);
    rc = ::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons((uint16_t)port);
    rc = ::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a);
  }
  if (rc != 0 || ::listen(fd, 128) != 0)
    return Status::error("rank 0 cannot serve the store on port " +
                         std::to_string(port) + ": " + std::strerror(errno));
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  sockaddr_storage bound{};
  socklen_t boundLen = sizeof bound;
  if (::getsockname(fd, reinterpret_cast<sockaddr *>(&bound), &boundLen) == 0)
    s->boundPort = ntohs(
        bound.ss_family == AF_INET6
            ? reinterpret_cast<sockaddr_in6 *>(&bound)->sin6_port
            : reinterpret_cast<sockaddr_in *>(&bound)->sin_port);
  int pipes[2];
  if (::pipe2(pipes, O_CLOEXEC) != 0)
    return Status::error(std::string("cannot start the store: ") +
                         std::strerror(errno));
  s->wakeRead = pipes[0];
  s->wakeWrite = pipes[1];
  s->thread = std::thread([p = s.get()] { p->serve(); });
  out = std::move(s);
  return Status::ok();
}

void StoreServer::serve() {
  std::map<std::string, std::string> data;
  uint64_t stored = 0; // bytes of keys and values held
  std::vector<Connection> conns;
  bool changed = false; // a key was set this turn: waits may complete
  // False (the writer is closed, nothing stored) past kMaxStoredBytes.
  auto put = [&](const std::string &key, std::string value) {
    auto it = data.find(key);
    uint64_t before = it == data.end() ? 0 : key.size() + it->second.size();
    if (stored - before + key.size() + value.size() > kMaxStoredBytes)
      return false;
    stored += key.size() + value.size() - before;
    data[key] = std::move(value);
    changed = true;
    return true;
  };
  auto ready = [&](const std::vector<std::string> &keys) {
    for (const std::string &k : keys)
      if (!data.count(k))
        return false;
    return true;
  };
  // One request: 1 served, 0 incomplete (more bytes needed), -1 close.
  auto handle = [&](Connection &c) -> int {
    Parser p(c.in);
    uint8_t q = 0;
    if (!p.u8(q))
      return 0;
    std::string key, value;
    auto keyList = [&](std::vector<std::string> &keys) -> int {
      uint64_t n = 0;
      if (!p.u64(n))
        return 0;
      if (n > kMaxKeysPerQuery)
        return -1;
      keys.resize(n);
      for (std::string &k : keys)
        if (int r = p.bytes(k, kMaxKeyBytes); r != 1)
          return r;
      return 1;
    };
    int r = 1;
    switch (q) {
    case kSet:
      if ((r = p.bytes(key, kMaxKeyBytes)) == 1)
        r = p.bytes(value, kMaxValueBytes);
      if (r == 1 && !put(key, std::move(value)))
        return -1;
      break;
    case kGet:
      if ((r = p.bytes(key, kMaxKeyBytes)) == 1) {
        auto it = data.find(key);
        if (it == data.end())
          return -1; // a GET must follow a WAIT
        appendString(c.out, it->second);
      }
      break;
    case kAdd: {
      uint64_t delta = 0;
      if ((r = p.bytes(key, kMaxKeyBytes)) == 1 && !p.u64(delta))
        r = 0;
      if (r == 1) {
        int64_t sum = 0;
        if (auto it = data.find(key); it != data.end())
          sum = std::strtoll(it->second.c_str(), nullptr, 10);
        sum += (int64_t)delta;
        if (!put(key, std::to_string(sum)))
          return -1;
        appendU64(c.out, (uint64_t)sum);
      }
      break;
    }
    case kCheck:
    case kWait: {
      std::vector<std::string> keys;
      if ((r = keyList(keys)) == 1) {
        if (q == kCheck)
          c.out.push_back(ready(keys) ? 0 : 1);
        else if (ready(keys))
          c.out.push_back(0);
        else
          c.waiting = std::move(keys);
      }
      break;
    }
    case kNumKeys:
      appendU64(c.out, data.size());
      break;
    case kDeleteKey:
      if ((r = p.bytes(key, kMaxKeyBytes)) == 1) {
        auto it = data.find(key);
        bool found = it != data.end();
        if (found) {
          stored -= key.size() + it->second.size();
          data.erase(it);
        }
        appendU64(c.out, found ? 1 : 0);
      }
      break;
    default: // COMPARE_SET and WATCH_KEY are not served; anything else is noise
      return -1;
    }
    if (r == 1)
      c.in.erase(0, p.at);
    return r;
  };

  // Serves the requests buffered on `c`; false to close it.
  auto drain = [&](Connection &c) {
    while (c.waiting.empty() && !c.in.empty()) { // a waiter is answered first
      int r = handle(c);
      if (r < 0)
        return false;
      if (r == 0)
        break;
    }
    return c.in.size() <= kMaxValueBytes + kMaxKeyBytes + 64 &&
           c.out.size() <= 2 * kMaxValueBytes;
  };

  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    fds.push_back({wakeRead, POLLIN, 0});
    fds.push_back({listenFd, POLLIN, 0});
    for (Connection &c : conns)
      fds.push_back({c.fd, (short)(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    if (fds[0].revents)
      break;
    size_t polled = conns.size(); // a connection accepted now waits a turn
    if (fds[1].revents & POLLIN) {
      int c = ::accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (c >= 0) {
        if (conns.size() >= kMaxConnections) {
          ::close(c);
        } else {
          int one = 1;
          ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          conns.push_back({c, {}, {}, {}});
        }
      }
    }
    for (size_t i = 0; i < polled; ++i) {
      Connection &c = conns[i];
      short ev = fds[i + 2].revents;
      if (ev & (POLLERR | POLLNVAL)) {
        c.dead = true;
        continue;
      }
      if (ev & (POLLIN | POLLHUP)) {
        char buf[65536];
        ssize_t k = ::recv(c.fd, buf, sizeof buf, 0);
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
          c.dead = true;
          continue;
        }
        if (k > 0)
          c.in.append(buf, (size_t)k);
        if (!drain(c))
          c.dead = true;
      }
      if ((ev & POLLOUT) && !c.out.empty()) {
        ssize_t k = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
        if (k < 0 && errno != EAGAIN && errno != EINTR)
          c.dead = true;
        else if (k > 0)
          c.out.erase(0, (size_t)k);
      }
    }
    // A SET or ADD may complete other connections' waits (and what they
    // sent after the wait may set more keys).
    while (changed) {
      changed = false;
      for (Connection &c : conns)
        if (!c.dead && !c.waiting.empty() && ready(c.waiting)) {
          c.waiting.clear();
          c.out.push_back(0);
          if (!drain(c))
            c.dead = true;
        }
    }
    for (size_t i = conns.size(); i-- > 0;)
      if (conns[i].dead) {
        ::close(conns[i].fd);
        conns.erase(conns.begin() + (long)i);
      }
  }
  for (Connection &c : conns)
    ::close(c.fd);
}

} // namespace fsdp
