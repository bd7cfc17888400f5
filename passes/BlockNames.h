//===- BlockNames.h - Repeated-block names, as PyTorch code spells them -*- C++ -*-===//
//
// The wrap policy (module paths) and the importer (ONNX node scopes) both
// recognise a block of a repeated family by its name: `h.0`, `layers.11`,
// `layer_3`, `encoder_layer_5`: a prefix ending in a letter or '_', then
// '.' or '_', then an index.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_PASSES_BLOCKNAMES_H
#define FSDP_PASSES_BLOCKNAMES_H

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"

namespace mlir::fsdp {

/// Splits `name` (`encoder.layers.encoder_layer_5`) into its family prefix
/// (`encoder.layers.encoder_layer`), separator ('_') and index (5); false
/// when it does not end in a block index.
inline bool splitBlockName(llvm::StringRef name, llvm::StringRef &prefix,
                           char &sep, int64_t &index) {
  size_t digits = name.size();
  while (digits > 0 && llvm::isDigit(name[digits - 1]))
    --digits;
  if (digits == name.size() || digits < 2)
    return false;
  sep = name[digits - 1];
  prefix = name.take_front(digits - 1);
  if ((sep != '.' && sep != '_') ||
      !(llvm::isAlpha(prefix.back()) || prefix.back() == '_'))
    return false;
  return !name.drop_front(digits).getAsInteger(10, index);
}

} // namespace mlir::fsdp

#endif // FSDP_PASSES_BLOCKNAMES_H
