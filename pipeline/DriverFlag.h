//===- DriverFlag.h - One fsdp-opt flag that sets a pass option -*- C++ -*-===//
//
// fsdp-opt's flags that set pass options are generated (DriverFlags.inc,
// from pipeline/DriverFlags.td and passes/Passes.td) as `Flag<T>`s: an
// llvm::cl::opt whose default is the pass's own, and which, for a string
// option with a closed set of values, refuses any other value while the
// command line is parsed, naming the flag and the values it takes.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_PIPELINE_DRIVERFLAG_H
#define FSDP_PIPELINE_DRIVERFLAG_H

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"

#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

namespace mlir::fsdp {

/// A string parser that takes only `choices` (any string when empty).
class ChoiceParser : public llvm::cl::parser<std::string> {
public:
  using llvm::cl::parser<std::string>::parser;
  bool parse(llvm::cl::Option &option, llvm::StringRef, llvm::StringRef arg,
             std::string &value) {
    if (!choices.empty() && !llvm::is_contained(choices, arg))
      return option.error("'" + arg + "' is not one of " +
                          llvm::join(choices, ", "));
    value = arg.str();
    return false;
  }
  std::vector<std::string> choices;
};

template <typename T> struct FlagParser {
  using type = llvm::cl::parser<T>;
};
template <> struct FlagParser<std::string> {
  using type = ChoiceParser;
};

template <typename T>
class Flag : public llvm::cl::opt<T, false, typename FlagParser<T>::type> {
public:
  Flag(const char *name, const char *help, const T &init,
       llvm::cl::OptionCategory &group,
       std::initializer_list<const char *> choices)
      : llvm::cl::opt<T, false, typename FlagParser<T>::type>(
            llvm::StringRef(name), llvm::cl::desc(help), llvm::cl::init(init),
            llvm::cl::cat(group)) {
    if constexpr (std::is_same_v<T, std::string>)
      for (const char *c : choices)
        this->getParser().choices.push_back(c);
  }
  using llvm::cl::opt<T, false, typename FlagParser<T>::type>::operator=;
};

} // namespace mlir::fsdp

#endif // FSDP_PIPELINE_DRIVERFLAG_H
