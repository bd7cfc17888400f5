//===- HostChannel.cpp - Collectives through shared memory ----------------===//
#include "runtime/comm/HostChannel.h"
#include "runtime/comm/Reduce.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <random>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace fsdp {

namespace {

constexpr int kKinds = 4; // Group::World, Shard, Replicate, Block
/// Bytes a mailbox carries per round: what a round moves, and the segment
/// is world x 4 x this (32 MiB for 8 ranks, within Docker's 64 MiB /dev/shm).
constexpr size_t kChunk = 1 << 20;

void pause() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

/// Whether process `pid` has exited: gone, or a zombie its parent has not
/// reaped yet (torchrun's agent reaps its workers only every few seconds).
/// Allocates nothing (it runs inside a step's waits: --check-allocations).
bool exited(int64_t pid) {
  if (pid <= 0)
    return false;
  if (::kill((pid_t)pid, 0) != 0 && errno == ESRCH)
    return true;
  char path[64], stat[512];
  std::snprintf(path, sizeof path, "/proc/%lld/stat", (long long)pid);
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false; // no /proc: the timeout decides
  ssize_t n = ::read(fd, stat, sizeof stat - 1);
  ::close(fd);
  if (n <= 0)
    return false;
  stat[n] = '\0';
  const char *paren = std::strrchr(stat, ')');
  return paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

std::string bootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

} // namespace

struct HostChannel::Mailbox {
  alignas(64) std::atomic<uint64_t> posted{0};
  alignas(64) std::atomic<uint64_t> read{0};
  alignas(64) char data[1]; // chunk bytes
};

HostChannel::~HostChannel() {
  if (base)
    ::munmap(base, mapped);
}

Status HostChannel::sameHost(Store &store, const std::string &prefix,
                             int64_t rank, int64_t size, bool &out) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string mine = std::string(host) + "/" + bootId();
  FSDP_RETURN_IF_ERROR(
      store.set(prefix + "host/" + std::to_string(rank), mine));
  out = true;
  for (int64_t r = 0; r < size; ++r) {
    std::string theirs;
    FSDP_RETURN_IF_ERROR(
        store.get(prefix + "host/" + std::to_string(r), theirs));
    out = out && theirs == mine;
  }
  return Status::ok();
}

Status HostChannel::open(Store &store, const std::string &prefix, int64_t rank,
                         int64_t size, double timeoutSeconds,
                         std::unique_ptr<HostChannel> &out) {
  std::unique_ptr<HostChannel> c(new HostChannel());
  c->rank = rank;
  c->timeout = timeoutSeconds;
  c->stride = (offsetof(Mailbox, data) + kChunk + 63) / 64 * 64;
  c->mapped = c->stride * kKinds * (size_t)size;
  // Rank 0 makes the segment and publishes its name ("" when it could not).
  std::string name, why;
  int fd = -1;
  bool created = false; // rank 0: the name is ours to unlink
  if (rank == 0) {
    std::random_device random;
    name =
        "/fsdp-" + std::to_string(::getpid()) + "-" + std::to_string(random());
    fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    created = fd >= 0;
    if (fd >= 0 && ::ftruncate(fd, (off_t)c->mapped) != 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
      ::shm_unlink(name.c_str());
      created = false;
    } else if (fd < 0) {
      why = std::strerror(errno);
    }
    FSDP_RETURN_IF_ERROR(store.set(prefix + "shm", fd >= 0 ? name : ""));
  } else {
    FSDP_RETURN_IF_ERROR(store.get(prefix + "shm", name));
    if (name.empty())
      why = "rank 0 could not make it";
    else if ((fd = ::shm_open(name.c_str(), O_RDWR, 0600)) < 0)
      why = std::strerror(errno);
  }
  if (fd >= 0) {
    c->base =
        ::mmap(nullptr, c->mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (c->base == MAP_FAILED) {
      c->base = nullptr;
      why = std::strerror(errno);
    }
    ::close(fd);
  }
  // Every rank publishes its pid (a wait notices a peer that exited), or
  // 0 where it has no mapping; when all have, rank 0 unlinks the name, so
  // nothing is left in /dev/shm whatever happens later.
  FSDP_RETURN_IF_ERROR(
      store.set(prefix + "pid/" + std::to_string(rank),
                std::to_string(c->base ? (int64_t)::getpid() : 0)));
  c->pids.assign(size, 0);
  for (int64_t r = 0; r < size; ++r) {
    std::string pid;
    FSDP_RETURN_IF_ERROR(store.get(prefix + "pid/" + std::to_string(r), pid));
    c->pids[r] = std::strtoll(pid.c_str(), nullptr, 10);
    if (c->pids[r] <= 0 && why.empty())
      why = "rank " + std::to_string(r) + " could not map it";
  }
  if (created)
    ::shm_unlink(name.c_str());
  if (!why.empty())
    return Status::error("shared memory " + name + ": " + why);
  out = std::move(c);
  return Status::ok();
}

HostChannel::Mailbox &HostChannel::box(int64_t r, Group g) {
  return *reinterpret_cast<Mailbox *>(
      static_cast<char *>(base) + ((size_t)r * kKinds + (size_t)g) * stride);
}

template <typename Ready>
Status HostChannel::waitFor(const std::vector<int64_t> &members,
                            int64_t position, const char *what, Ready ready) {
  using Clock = std::chrono::steady_clock;
  Clock::time_point start{}, lastCheck{};
  for (uint64_t spin = 0;; ++spin) {
    bool all = true;
    for (size_t j = 0; j < members.size() && all; ++j)
      all = (int64_t)j == position || ready(members[j]);
    if (all)
      return Status::ok();
    if (spin < 4096) {
      pause();
      continue;
    }
    Clock::time_point now = Clock::now();
    if (spin == 4096)
      start = lastCheck = now;
    // More ranks than cores: give the core to the peer it waits for.
    if (now - start < std::chrono::milliseconds(2))
      sched_yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    if (now - lastCheck > std::chrono::milliseconds(100)) {
      lastCheck = now;
      for (int64_t m : members)
        if (m != rank && exited(pids[m]))
          return Status::error("rank " + std::to_string(m) + " (process " +
                               std::to_string(pids[m]) + ") exited during " +
                               what);
    }
    if (std::chrono::duration<double>(now - start).count() > timeout)
      return Status::error(std::string(what) + " waited " +
                           std::to_string((int)timeout) + " s for a peer rank");
  }
}

template <typename Write, typename Read>
Status HostChannel::round(Group g, const std::vector<int64_t> &members,
                          int64_t position, Write write, Read read) {
  uint64_t r = ++rounds[(int)g];
  // The peers have read this rank's previous round: its mailbox is free.
  FSDP_RETURN_IF_ERROR(waitFor(
      members, position, "a collective's previous round", [&](int64_t m) {
        return box(m, g).read.load(std::memory_order_acquire) >= r - 1;
      }));
  Mailbox &mine = box(rank, g);
  write(mine.data);
  mine.posted.store(r, std::memory_order_release);
  FSDP_RETURN_IF_ERROR(
      waitFor(members, position, "a collective", [&](int64_t m) {
        return box(m, g).posted.load(std::memory_order_acquire) >= r;
      }));
  read([&](size_t j) -> const char * { return box(members[j], g).data; });
  mine.read.store(r, std::memory_order_release);
  return Status::ok();
}

Status HostChannel::allGather(Group g, const std::vector<int64_t> &members,
                              int64_t position, const void *in, void *out,
                              size_t bytes) {
  const char *src = static_cast<const char *>(in);
  char *dst = static_cast<char *>(out);
  for (size_t done = 0; done < bytes;) {
    size_t piece = std::min(kChunk, bytes - done);
    FSDP_RETURN_IF_ERROR(round(
        g, members, position,
        [&](char *mine) { std::memcpy(mine, src + done, piece); },
        [&](auto peer) {
          for (size_t j = 0; j < members.size(); ++j) {
            char *to = dst + j * bytes + done;
            const char *from = (int64_t)j == position ? src + done : peer(j);
            if (to != from)
              std::memmove(to, from, piece);
          }
        }));
    done += piece;
  }
  return Status::ok();
}

Status HostChannel::reduceScatter(Group g, const std::vector<int64_t> &members,
                                  int64_t position, const void *in, void *out,
                                  int64_t count, Elem e) {
  size_t n = members.size(), width = (size_t)elemBytes(e);
  // Each round carries every destination's next piece of its chunk.
  int64_t per = (int64_t)std::max<size_t>(1, kChunk / n / width);
  const char *src = static_cast<const char *>(in);
  char *dst = static_cast<char *>(out);
  for (int64_t done = 0; done < count;) {
    int64_t piece = std::min(per, count - done);
    size_t pieceBytes = (size_t)piece * width;
    FSDP_RETURN_IF_ERROR(round(
        g, members, position,
        [&](char *mine) {
          for (size_t d = 0; d < n; ++d)
            std::memcpy(mine + d * pieceBytes,
                        src + (d * (size_t)count + (size_t)done) * width,
                        pieceBytes);
        },
        [&](auto peer) {
          // In position order on every rank: the same bits wherever it runs.
          char *to = dst + (size_t)done * width;
          size_t at = (size_t)position * pieceBytes;
          std::memcpy(to, peer(0) + at, pieceBytes);
          for (size_t j = 1; j < n; ++j)
            sumElements(to, to, peer(j) + at, piece, e);
        }));
    done += piece;
  }
  return Status::ok();
}

Status HostChannel::allReduce(Group g, const std::vector<int64_t> &members,
                              int64_t position, const void *in, void *out,
                              int64_t count, Elem e) {
  size_t n = members.size(), width = (size_t)elemBytes(e);
  int64_t per = (int64_t)std::max<size_t>(1, kChunk / width);
  const char *src = static_cast<const char *>(in);
  char *dst = static_cast<char *>(out);
  for (int64_t done = 0; done < count;) {
    int64_t piece = std::min(per, count - done);
    size_t pieceBytes = (size_t)piece * width, at = (size_t)done * width;
    FSDP_RETURN_IF_ERROR(round(
        g, members, position,
        [&](char *mine) { std::memcpy(mine, src + at, pieceBytes); },
        [&](auto peer) {
          std::memcpy(dst + at, peer(0), pieceBytes);
          for (size_t j = 1; j < n; ++j)
            sumElements(dst + at, dst + at, peer(j), piece, e);
        }));
    done += piece;
  }
  return Status::ok();
}

} // namespace fsdp
