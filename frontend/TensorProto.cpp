//===- TensorProto.cpp - ONNX tensor protos as host tensors --------------===//
//
// An ONNX TensorProto's element type, checked dimensions and values (typed
// fields or raw little-endian bytes) read into a HostTensor, for constants
// and the shapes and masks the importer folds. Parameters' bytes are never
// read here.
//
//===----------------------------------------------------------------------===//
#include "frontend/OnnxImporter.h"
#include "frontend/NodeContext.h"

#include <onnx/onnx_pb.h>

using namespace mlir;
using namespace mlir::fsdp;

//===----------------------------------------------------------------------===//
// Tensor protos
//===----------------------------------------------------------------------===//

Type mlir::fsdp::onnxElementType(MLIRContext *ctx, int dataType) {
  Builder b(ctx);
  switch (dataType) {
  case onnx::TensorProto::FLOAT:
    return b.getF32Type();
  case onnx::TensorProto::DOUBLE:
    return b.getF64Type();
  case onnx::TensorProto::FLOAT16:
    return b.getF16Type();
  case onnx::TensorProto::BFLOAT16:
    return b.getBF16Type();
  case onnx::TensorProto::INT64:
    return b.getI64Type();
  case onnx::TensorProto::INT32:
    return b.getI32Type();
  case onnx::TensorProto::INT16:
    return b.getI16Type();
  case onnx::TensorProto::INT8:
    return b.getI8Type();
  case onnx::TensorProto::UINT8:
    return IntegerType::get(ctx, 8, IntegerType::Unsigned);
  case onnx::TensorProto::BOOL:
    return b.getI1Type();
  default:
    return Type();
  }
}

int64_t mlir::fsdp::byteWidth(Type t) {
  return t.isInteger(1) ? 1 : (t.getIntOrFloatBitWidth() + 7) / 8;
}

FailureOr<SmallVector<int64_t>>
mlir::fsdp::checkedDims(ArrayRef<int64_t> dims, Location loc, StringRef what) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0)
      return emitError(loc) << what << ": negative dimension " << d;
    if (d != 0 && n > (int64_t(1) << 50) / d)
      return emitError(loc) << what << ": element count overflows";
    n *= d;
  }
  return SmallVector<int64_t>(dims);
}

/// Reads element `i` of a typed (non-raw) field.
static double typedValue(const onnx::TensorProto &t, int64_t i) {
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT:
    return t.float_data(i);
  case onnx::TensorProto::DOUBLE:
    return t.double_data(i);
  case onnx::TensorProto::INT64:
    return (double)t.int64_data(i);
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16: {
    // Stored as raw 16-bit patterns in int32_data.
    uint16_t bits = (uint16_t)t.int32_data(i);
    const llvm::fltSemantics &sem = t.data_type() == onnx::TensorProto::FLOAT16
                                        ? APFloat::IEEEhalf()
                                        : APFloat::BFloat();
    return APFloat(sem, APInt(16, bits)).convertToDouble();
  }
  default:
    return t.int32_data(i);
  }
}

int64_t mlir::fsdp::typedCount(const onnx::TensorProto &t) {
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT:
    return t.float_data_size();
  case onnx::TensorProto::DOUBLE:
    return t.double_data_size();
  case onnx::TensorProto::INT64:
    return t.int64_data_size();
  default:
    return t.int32_data_size();
  }
}

/// Reads element `i` of little-endian raw data.
static double rawValue(const std::string &raw, Type et, int dataType,
                       int64_t i) {
  const char *p = raw.data() + i * byteWidth(et);
  auto load = [&](auto v) {
    std::memcpy(&v, p, sizeof(v));
    return v;
  };
  switch (dataType) {
  case onnx::TensorProto::FLOAT:
    return load(float());
  case onnx::TensorProto::DOUBLE:
    return load(double());
  case onnx::TensorProto::INT64:
    return (double)load(int64_t());
  case onnx::TensorProto::INT32:
    return load(int32_t());
  case onnx::TensorProto::INT16:
    return load(int16_t());
  case onnx::TensorProto::INT8:
    return load(int8_t());
  case onnx::TensorProto::UINT8:
  case onnx::TensorProto::BOOL:
    return load(uint8_t());
  case onnx::TensorProto::FLOAT16:
    return APFloat(APFloat::IEEEhalf(), APInt(16, load(uint16_t())))
        .convertToDouble();
  case onnx::TensorProto::BFLOAT16:
    return APFloat(APFloat::BFloat(), APInt(16, load(uint16_t())))
        .convertToDouble();
  }
  return 0;
}

FailureOr<HostTensor> mlir::fsdp::readTensorProto(const onnx::TensorProto &t,
                                                  MLIRContext *ctx,
                                                  Location loc,
                                                  StringRef what) {
  Type et = onnxElementType(ctx, t.data_type());
  if (!et)
    return emitError(loc) << what << ": unsupported data type "
                          << t.data_type();
  auto dims = checkedDims(
      SmallVector<int64_t>(t.dims().begin(), t.dims().end()), loc, what);
  if (failed(dims))
    return failure();
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    return emitError(loc) << what
                          << ": external data is only supported for float "
                             "parameters";
  if (t.segment().begin() || t.segment().end())
    return emitError(loc) << what << ": segmented tensors are not supported";
  HostTensor h = HostTensor::zeros(et, *dims);
  int64_t n = h.numel();
  bool int64 = t.data_type() == onnx::TensorProto::INT64;
  if (n > kMaxFoldElements)
    return emitError(loc) << what << ": constant of " << n
                          << " elements is too large to import";
  if (t.has_raw_data()) {
    if ((int64_t)t.raw_data().size() != n * byteWidth(et))
      return emitError(loc)
             << what << ": raw_data holds " << t.raw_data().size()
             << " bytes, expected " << n * byteWidth(et) << " for " << h.type();
    for (int64_t i = 0; i < n; ++i) {
      if (int64) // exactly: a double holds integers to 2^53 only
        std::memcpy(&h.ints[i], t.raw_data().data() + i * 8, 8);
      else
        h.set(i, rawValue(t.raw_data(), et, t.data_type(), i));
    }
    return h;
  }
  if (typedCount(t) != n)
    return emitError(loc) << what << ": holds " << typedCount(t)
                          << " values, expected " << n << " for " << h.type();
  for (int64_t i = 0; i < n; ++i) {
    if (int64)
      h.ints[i] = t.int64_data(i);
    else
      h.set(i, typedValue(t, i));
  }
  return h;
}

