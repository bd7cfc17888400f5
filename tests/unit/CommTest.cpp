//===- CommTest.cpp - The c10d store and the Gloo collectives -------------===//
//
// The store against itself and against PyTorch's own TCPStore client (the
// wire protocol is torch's); Gloo collectives between ranks that are threads
// of this process, on world sizes 2, 3 (a ring that is no power of two) and
// 4 with shard and replicate groups, in f32 and bf16, against sums computed
// here.
//
//===----------------------------------------------------------------------===//
#include "runtime/comm/Comm.h"
#include "runtime/comm/Store.h"
#include "runtime/support/Half.h"

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <thread>

using namespace fsdp;

namespace {

int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
  int port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

TEST(Store, SetGetAddAndWait) {
  std::unique_ptr<StoreServer> server;
  ASSERT_TRUE(StoreServer::start(0, server));
  std::unique_ptr<Store> a, b;
  ASSERT_TRUE(Store::connect("127.0.0.1", server->port(), 5, a));
  ASSERT_TRUE(Store::connect("127.0.0.1", server->port(), 5, b));
  ASSERT_TRUE(a->set("k", std::string("v\0w", 3)));
  std::string v;
  ASSERT_TRUE(b->get("k", v));
  EXPECT_EQ(v, std::string("v\0w", 3));
  int64_t sum = 0;
  ASSERT_TRUE(a->add("n", 5, sum));
  ASSERT_TRUE(b->add("n", -2, sum));
  EXPECT_EQ(sum, 3);
  ASSERT_TRUE(a->get("n", v));
  EXPECT_EQ(v, "3"); // counters are decimal text, as in torch
  // A get waits for the key another client sets later.
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_TRUE(a->set("late", "here"));
  });
  ASSERT_TRUE(b->get("late", v));
  EXPECT_EQ(v, "here");
  later.join();
}

TEST(Store, GetTimesOutNamingTheKey) {
  std::unique_ptr<StoreServer> server;
  ASSERT_TRUE(StoreServer::start(0, server));
  std::unique_ptr<Store> a;
  ASSERT_TRUE(Store::connect("127.0.0.1", server->port(), 0.3, a));
  std::string v;
  auto start = std::chrono::steady_clock::now();
  Status s = a->get("never", v);
  double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("'never'"), std::string::npos) << s.message();
  EXPECT_LT(took, 2.0);
  // The connection is out of step after that: later calls fail at once.
  start = std::chrono::steady_clock::now();
  EXPECT_FALSE(a->set("k", "v"));
  EXPECT_LT(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count(),
      0.2);
}

// A client that would fill the store past its bound is closed and its
// value dropped; the store goes on serving everyone else.
TEST(Store, FillingItClosesTheWriterOnly) {
  std::unique_ptr<StoreServer> server;
  ASSERT_TRUE(StoreServer::start(0, server));
  std::unique_ptr<Store> hog, other, quick;
  ASSERT_TRUE(Store::connect("127.0.0.1", server->port(), 5, hog));
  // (Reading a 64 MiB value back took 0.6 s on one machine: the reader's
  // timeout is generous, the one that waits for a key never stored short.)
  ASSERT_TRUE(Store::connect("127.0.0.1", server->port(), 10, other));
  ASSERT_TRUE(Store::connect("127.0.0.1", server->port(), 0.5, quick));
  std::string big(StoreServer::kMaxValueBytes - 1024, 'x');
  int64_t fits = StoreServer::kMaxStoredBytes / big.size(); // 4
  for (int64_t i = 0; i < fits; ++i)
    ASSERT_TRUE(hog->set("v" + std::to_string(i), big));
  (void)hog->set("over", big); // sent; the server closes the connection
  int64_t sum = 0;
  EXPECT_FALSE(hog->add("n", 1, sum));
  std::string v;
  ASSERT_TRUE(other->set("small", "ok"));
  ASSERT_TRUE(other->get("small", v));
  EXPECT_EQ(v, "ok");
  ASSERT_TRUE(other->get("v0", v));
  EXPECT_EQ(v.size(), big.size());
  EXPECT_FALSE(quick->get("over", v)); // never stored: the wait times out
}

TEST(Store, NoServerIsAnErrorWithinTheTimeout) {
  std::unique_ptr<Store> a;
  Status s = Store::connect("127.0.0.1", freePort(), 0.3, a);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("cannot reach the store"), std::string::npos);
}

// PyTorch's TCPStore client against our server: the same wire protocol.
// (torch's client puts "/" before every key.)
TEST(Store, TorchClientInterop) {
  if (::access("/usr/bin/python3", X_OK) != 0 ||
      std::system("/usr/bin/python3 -c 'import torch.distributed' "
                  ">/dev/null 2>&1") != 0)
    GTEST_SKIP() << "no python3-torch";
  std::unique_ptr<StoreServer> server;
  ASSERT_TRUE(StoreServer::start(0, server));
  std::unique_ptr<Store> ours;
  ASSERT_TRUE(Store::connect("127.0.0.1", server->port(), 20, ours));
  ASSERT_TRUE(ours->set("/from-fsdp", "world"));
  std::string script = "import datetime, sys\n"
                       "from torch.distributed import TCPStore\n"
                       "s = TCPStore('127.0.0.1', " +
                       std::to_string(server->port()) +
                       ", 1, False, datetime.timedelta(seconds=20))\n"
                       "assert s.get('from-fsdp') == b'world'\n"
                       "s.set('from-torch', b'hello')\n"
                       "assert s.add('n', 3) == 3\n"
                       "s.wait(['from-fsdp'])\n"
                       "assert s.num_keys() >= 3\n";
  std::string cmd = "/usr/bin/python3 -c \"" + script + "\"";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::string v;
  ASSERT_TRUE(ours->get("/from-torch", v));
  EXPECT_EQ(v, "hello");
  int64_t sum = 0;
  ASSERT_TRUE(ours->add("/n", 4, sum));
  EXPECT_EQ(sum, 7);
}

/// Runs body(rank's comm) on `world` threads, each a rank meeting the
/// others through a store rank 0 serves, as under torchrun --standalone.
void onRanks(int world, int64_t shard,
             const std::function<void(Comm &, int)> &body) {
  int port = freePort();
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  ::unsetenv("TORCHELASTIC_USE_AGENT_STORE");
  ::unsetenv("FSDP_STORE_PORT");
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r)
    ranks.emplace_back([&, r] {
      LaunchInfo launch;
      launch.rank = r;
      launch.size = world;
      launch.launcher = "test";
      std::unique_ptr<Comm> comm;
      Status s = glooComm(launch, 20, comm);
      ASSERT_TRUE(s) << s.message();
      ASSERT_TRUE(comm->split(shard, 0));
      comm->reserve(4);
      body(*comm, r);
    });
  for (std::thread &t : ranks)
    t.join();
}

/// Rank r's element i: distinct per rank and element, exact in bf16.
float value(int r, int64_t i) { return (float)((r + 1) * 8 + (i % 13)) / 4; }

/// World size, transport (shared memory between ranks of one host, or
/// Gloo's TCP: FSDP_GLOO_SHM=0), elements per rank (over 1 MiB: the host
/// channel's collectives take several rounds).
class GlooWorld
    : public ::testing::TestWithParam<std::tuple<int, bool, int64_t>> {};

TEST_P(GlooWorld, CollectivesMatchTheirDefinitions) {
  auto [world, shm, count] = GetParam(); // count odd: chunks of every size
  ::setenv("FSDP_GLOO_SHM", shm ? "1" : "0", 1);
  onRanks(world, world, [&](Comm &comm, int r) {
    ASSERT_EQ(comm.progressesAlone(), !shm);
    std::vector<float> in(count * world), out(count * world);
    for (int64_t i = 0; i < count * world; ++i)
      in[i] = value(r, i);
    // all-reduce, averaged, in place
    std::vector<float> ar = in;
    ASSERT_TRUE(comm.allReduceStart(ar.data(), ar.data(), count * world,
                                    Elem::F32, true, 0, Group::World));
    // all-gather of this rank's first `count`
    ASSERT_TRUE(
        comm.allGatherStart(in.data(), out.data(), count, 4, 1, Group::Shard));
    // reduce-scatter, summed
    std::vector<float> rs(count);
    ASSERT_TRUE(comm.reduceScatterStart(in.data(), rs.data(), count, Elem::F32,
                                        false, 2, Group::Shard));
    ASSERT_TRUE(comm.wait(2));
    ASSERT_TRUE(comm.wait(1));
    ASSERT_TRUE(comm.wait(0));
    for (int64_t i = 0; i < count * world; ++i) {
      float sum = 0;
      for (int q = 0; q < world; ++q)
        sum += value(q, i);
      ASSERT_FLOAT_EQ(ar[i], sum / world) << i;
      ASSERT_EQ(out[i], value((int)(i / count), i % count)) << i;
    }
    for (int64_t i = 0; i < count; ++i) {
      float sum = 0;
      for (int q = 0; q < world; ++q)
        sum += value(q, r * count + i);
      ASSERT_FLOAT_EQ(rs[i], sum) << i;
    }
    // bf16: the sums of these small multiples of 1/4 are exact.
    std::vector<uint16_t> h(count * world), hs(count);
    for (int64_t i = 0; i < count * world; ++i)
      h[i] = bf16FromFloat(value(r, i));
    ASSERT_TRUE(comm.reduceScatterStart(h.data(), hs.data(), count, Elem::BF16,
                                        true, 3, Group::Shard));
    ASSERT_TRUE(comm.wait(3));
    for (int64_t i = 0; i < count; ++i) {
      float sum = 0;
      for (int q = 0; q < world; ++q)
        sum += value(q, r * count + i);
      ASSERT_EQ(floatFromBf16(hs[i]), floatFromBf16(bf16FromFloat(sum / world)))
          << i;
    }
    // checkSame: equal values pass, a different one fails on every rank.
    ASSERT_TRUE(comm.checkSame(42, "the answer"));
    Status s = comm.checkSame(r == world - 1 ? 7 : 42, "the plan");
    ASSERT_FALSE(s);
    EXPECT_NE(s.message().find("the plan differs"), std::string::npos);
    uint64_t id = r == 0 ? 0x1234567890abcdefull : 0;
    Status b = comm.broadcast(&id, sizeof id, "id");
    ASSERT_TRUE(b) << b.message();
    EXPECT_EQ(id, 0x1234567890abcdefull);
    // Rank 0 serves the store: it leaves after every rank has read it.
    ASSERT_TRUE(comm.checkSame(1, "the end"));
  });
}

INSTANTIATE_TEST_SUITE_P(
    Worlds, GlooWorld,
    ::testing::Combine(::testing::Values(2, 3, 4), ::testing::Bool(),
                       ::testing::Values(int64_t(1001), int64_t(300001))));

// Hybrid: 4 ranks, shard groups {0,1} {2,3}, replicate groups {0,2} {1,3}.
class GlooGroups : public ::testing::TestWithParam<bool> {};

TEST_P(GlooGroups, ShardAndReplicateGroups) {
  const int64_t count = 37;
  ::setenv("FSDP_GLOO_SHM", GetParam() ? "1" : "0", 1);
  onRanks(4, 2, [&](Comm &comm, int r) {
    ASSERT_EQ(comm.size(Group::Shard), 2);
    ASSERT_EQ(comm.size(Group::Replicate), 2);
    std::vector<float> in(2 * count), rs(count), ar(count);
    for (int64_t i = 0; i < 2 * count; ++i)
      in[i] = value(r, i);
    ASSERT_TRUE(comm.reduceScatterStart(in.data(), rs.data(), count, Elem::F32,
                                        false, 0, Group::Shard));
    ASSERT_TRUE(comm.wait(0));
    ASSERT_TRUE(comm.allReduceStart(rs.data(), ar.data(), count, Elem::F32,
                                    false, 1, Group::Replicate));
    ASSERT_TRUE(comm.wait(1));
    int64_t pos = r % 2;
    for (int64_t i = 0; i < count; ++i) {
      // Summed over the shard group, then over the replicas: every rank's
      // part at this rank's position.
      float sum = 0;
      for (int q = 0; q < 4; ++q)
        sum += value(q, pos * count + i);
      ASSERT_FLOAT_EQ(ar[i], sum) << i;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, GlooGroups, ::testing::Bool());

} // namespace
