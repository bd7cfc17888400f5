//===- CheckedJson.h - JSON fields read with their types checked -*- C++ -*-===//
//
// Every loader of a file fsdp writes (plans, checkpoint manifests, traces)
// reads its JSON through this: a field's presence and type are checked
// before its value is taken, so a hand-edited or hostile file gets an error
// naming the field (`plan.meta.world_size: expected an integer`) and never
// an uncaught nlohmann exception (an abort).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_SUPPORT_CHECKEDJSON_H
#define FSDP_RUNTIME_SUPPORT_CHECKEDJSON_H

#include "runtime/support/Status.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace fsdp {

/// The first failure is kept in `status`; every reader returns false once
/// a field is missing or of the wrong type.
struct JsonReader {
  using json = nlohmann::json;
  Status status = Status::ok();

  bool fail(const std::string &where, const std::string &what) {
    if (status.isOk())
      status = Status::error(where + ": " + what);
    return false;
  }

  /// An optional field that is absent is fine, unless `obj` was not an
  /// object at all (field() failed).
  bool absent(bool required) const { return !required && status.isOk(); }

  const json *field(const json &obj, const std::string &key,
                    const std::string &where, bool required = true) {
    if (!obj.is_object())
      return fail(where, "expected an object"), nullptr;
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (required)
        fail(where, "missing field '" + key + "'");
      return nullptr;
    }
    return &*it;
  }

  bool integer(const json &obj, const std::string &key,
               const std::string &where, int64_t &out, bool required = true) {
    const json *f = field(obj, key, where, required);
    if (!f)
      return absent(required);
    if (!f->is_number_integer() ||
        (f->is_number_unsigned() &&
         f->get<uint64_t>() > uint64_t(INT64_MAX)))
      return fail(where + "." + key, "expected an integer of 64 bits");
    out = f->get<int64_t>();
    return true;
  }

  bool unsignedInteger(const json &obj, const std::string &key,
                       const std::string &where, uint64_t &out,
                       bool required = true) {
    const json *f = field(obj, key, where, required);
    if (!f)
      return absent(required);
    if (!f->is_number_unsigned())
      return fail(where + "." + key, "expected a non-negative integer");
    out = f->get<uint64_t>();
    return true;
  }

  bool number(const json &obj, const std::string &key, const std::string &where,
              double &out, bool required = true) {
    const json *f = field(obj, key, where, required);
    if (!f)
      return absent(required);
    if (!f->is_number())
      return fail(where + "." + key, "expected a number");
    out = f->get<double>();
    return true;
  }

  bool boolean(const json &obj, const std::string &key,
               const std::string &where, bool &out, bool required = true) {
    const json *f = field(obj, key, where, required);
    if (!f)
      return absent(required);
    if (!f->is_boolean())
      return fail(where + "." + key, "expected true or false");
    out = f->get<bool>();
    return true;
  }

  bool string(const json &obj, const std::string &key, const std::string &where,
              std::string &out, bool required = true) {
    const json *f = field(obj, key, where, required);
    if (!f)
      return absent(required);
    if (!f->is_string())
      return fail(where + "." + key, "expected a string");
    out = f->get<std::string>();
    return true;
  }

  /// An array of integers, each within [0, 2^40].
  bool dims(const json &obj, const std::string &key, const std::string &where,
            std::vector<int64_t> &out) {
    const json *f = field(obj, key, where);
    if (!f)
      return false;
    if (!f->is_array())
      return fail(where + "." + key, "expected an array");
    out.clear();
    for (const json &d : *f) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0 ||
          d.get<int64_t>() > (int64_t(1) << 40))
        return fail(where + "." + key,
                    "expected non-negative integers of at most 2^40");
      out.push_back(d.get<int64_t>());
    }
    return true;
  }
};

} // namespace fsdp

#endif // FSDP_RUNTIME_SUPPORT_CHECKEDJSON_H
