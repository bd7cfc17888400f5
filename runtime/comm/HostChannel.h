//===- HostChannel.h - Collectives through shared memory --------*- C++ -*-===//
//
// Ranks a launcher without MPI started on one host (torchrun's usual case)
// need not talk over TCP: Gloo's transfers there run on threads of their
// own, and while the ranks' kernels fill every core each small collective
// waits for those threads to be scheduled (the demo's 200 KB gathers took
// 350-700 us in a step against 85 us idle). A HostChannel moves the data
// through one shared-memory segment instead, on the calling thread, inside
// the wait (as MPI's shared-memory transport does): no thread hand-off.
//
// The segment holds, per world rank and per group kind, a mailbox: a round
// number (`posted`), the last round its owner finished reading (`read`) and
// 1 MiB of data. One round of a collective: wait until every peer has read
// this rank's previous round, write this rank's part, post the round, wait
// until every peer has posted it, read and combine, mark it read. Sums run
// over the group in position order, so every rank computes the same bits.
// Longer collectives take several rounds. A wait gives up after the
// communicator's timeout, or at once when a peer's process has exited.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_COMM_HOSTCHANNEL_H
#define FSDP_RUNTIME_COMM_HOSTCHANNEL_H

#include "runtime/comm/Comm.h"
#include "runtime/comm/Store.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace fsdp {

class HostChannel {
public:
  ~HostChannel();
  /// Whether every rank of the job runs on this host (each rank publishes
  /// its host name and boot id under `prefix`; collective).
  static Status sameHost(Store &store, const std::string &prefix, int64_t rank,
                         int64_t size, bool &out);
  /// Maps the job's segment: rank 0 creates it and publishes its name,
  /// the others open it, and rank 0 unlinks it once all have (collective).
  static Status open(Store &store, const std::string &prefix, int64_t rank,
                     int64_t size, double timeoutSeconds,
                     std::unique_ptr<HostChannel> &out);

  /// The collectives of Comm.h over `members` (world ranks, in group
  /// order; this rank is members[position]), on group kind `g`'s mailboxes.
  Status allGather(Group g, const std::vector<int64_t> &members,
                   int64_t position, const void *in, void *out, size_t bytes);
  Status reduceScatter(Group g, const std::vector<int64_t> &members,
                       int64_t position, const void *in, void *out,
                       int64_t count, Elem e);
  Status allReduce(Group g, const std::vector<int64_t> &members,
                   int64_t position, const void *in, void *out, int64_t count,
                   Elem e);

private:
  struct Mailbox;
  HostChannel() = default;
  Mailbox &box(int64_t rank, Group g);
  /// One round on g's mailboxes: waits until every peer has read this
  /// rank's last round, `write(mailbox data)`, posts it, waits for every
  /// peer's, `read(peer)` (peer(j): member j's data), marks it read.
  template <typename Write, typename Read>
  Status round(Group g, const std::vector<int64_t> &members, int64_t position,
               Write write, Read read);
  /// Spins (then yields) until `ready` or the deadline or a peer's exit.
  template <typename Ready>
  Status waitFor(const std::vector<int64_t> &members, int64_t position,
                 const char *what, Ready ready);

  void *base = nullptr;
  size_t mapped = 0, stride = 0;
  int64_t rank = 0;
  double timeout = 0;
  std::vector<int64_t> pids;
  uint64_t rounds[4] = {0, 0, 0, 0};
};

} // namespace fsdp

#endif // FSDP_RUNTIME_COMM_HOSTCHANNEL_H
