//===- Store.h - A c10d TCPStore client and server -------------*- C++ -*-===//
//
// Ranks launched without MPI meet through a key-value store speaking
// PyTorch's c10d TCPStore wire protocol (the client speaks torch 1.13's,
// the one Debian 12 ships, and torch 2.x's, found by a probe at connect;
// the server speaks 1.13's): under torchrun's static rendezvous the agent
// already runs one at
// MASTER_ADDR:MASTER_PORT and fsdp-run is its client; where no agent runs one
// (torchrun --standalone or --rdzv-backend=c10d, Slurm, a hand launch) rank 0
// serves it (`StoreServer`). Gloo's contexts and NCCL's unique id are
// exchanged through it. Every call has a deadline; the server treats each
// connection as hostile (sizes are bounded before anything is allocated, an
// unknown message closes the connection).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_COMM_STORE_H
#define FSDP_RUNTIME_COMM_STORE_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace fsdp {

class Store {
public:
  ~Store();
  /// Connects to host:port, retrying until `timeoutSeconds` pass (the
  /// server may not be up yet); every later call has the same limit.
  static Status connect(const std::string &host, int port,
                        double timeoutSeconds, std::unique_ptr<Store> &out);
  Status set(const std::string &key, const std::string &value);
  /// Waits until `key` is set (up to the timeout), then reads it.
  Status get(const std::string &key, std::string &value);
  /// Adds `delta` to the counter `key` (0 when absent); `result` is the sum.
  Status add(const std::string &key, int64_t delta, int64_t &result);
  /// "host:port", for messages.
  const std::string &endpoint() const { return where; }
  double timeoutSeconds() const { return timeout; }

private:
  Store(int fd, std::string where, double timeout, uint8_t shift)
      : fd(fd), where(std::move(where)), timeout(timeout), shift(shift) {}
  Status lost(const std::string &what);
  int fd;
  std::string where;
  double timeout;
  uint8_t shift; // 0: torch 1.13's query numbers; 1: torch 2.x's
  /// How long connect waits for a 1.13 store's answer before it takes the
  /// store for a torch 2.x one.
  static constexpr double kProbeSeconds = 2.0;
  std::mutex mu; // one request at a time on the connection
};

/// The store's server side, on a thread of its own, until destroyed.
class StoreServer {
public:
  ~StoreServer();
  /// Listens on `port` (0: any free one) on every interface.
  static Status start(int port, std::unique_ptr<StoreServer> &out);
  int port() const { return boundPort; }

  /// Bounds on what one connection may send or hold.
  static constexpr uint64_t kMaxKeyBytes = 4096;
  static constexpr uint64_t kMaxValueBytes = 64ull << 20;
  static constexpr uint64_t kMaxKeysPerQuery = 4096;
  static constexpr size_t kMaxConnections = 1024;
  /// All keys and values together.
  static constexpr uint64_t kMaxStoredBytes = 256ull << 20;

private:
  StoreServer() = default;
  void serve();
  int listenFd = -1, wakeRead = -1, wakeWrite = -1, boundPort = 0;
  std::thread thread;
};

} // namespace fsdp

#endif // FSDP_RUNTIME_COMM_STORE_H
