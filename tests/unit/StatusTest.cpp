#include "runtime/support/Status.h"

#include <gtest/gtest.h>

using fsdp::Status;

static Status failing() { return Status::error("offset outside the arena"); }

static Status relays(bool fail, bool &reachedEnd) {
  FSDP_RETURN_IF_ERROR(fail ? failing() : Status::ok());
  reachedEnd = true;
  return Status::ok();
}

TEST(Status, OkAndError) {
  EXPECT_TRUE(Status::ok().isOk());
  Status s = failing();
  EXPECT_FALSE(s.isOk());
  EXPECT_FALSE(static_cast<bool>(s));
  EXPECT_EQ(s.message(), "offset outside the arena");
}

TEST(Status, ContextPrefixesErrorsOnly) {
  Status s = failing();
  s.withContext("model.plan");
  EXPECT_EQ(s.message(), "model.plan: offset outside the arena");
  Status ok = Status::ok();
  ok.withContext("model.plan");
  EXPECT_TRUE(ok.isOk());
  EXPECT_EQ(ok.message(), "");
}

TEST(Status, ReturnIfErrorRelaysAndStops) {
  bool reached = false;
  EXPECT_FALSE(relays(true, reached).isOk());
  EXPECT_FALSE(reached);
  EXPECT_TRUE(relays(false, reached).isOk());
  EXPECT_TRUE(reached);
}
