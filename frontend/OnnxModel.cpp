//===- OnnxModel.cpp - Parse and validate an ONNX model -------------------===//
#include "frontend/OnnxModel.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringSet.h"

#include <onnx/onnx_pb.h>

#include <climits>
#include <deque>

using namespace mlir;
using namespace mlir::fsdp;

std::string mlir::fsdp::describeNode(const onnx::NodeProto &node, int index) {
  std::string who = node.name().empty() ? "#" + std::to_string(index)
                                        : "'" + node.name() + "'";
  return "node " + who + " (" + node.op_type() + ")";
}

static bool isDefaultDomain(const std::string &domain) {
  return domain.empty() || domain == "ai.onnx";
}

FailureOr<OnnxGraph> mlir::fsdp::parseOnnxModel(StringRef bytes, Location loc) {
  OnnxGraph g;
  g.model = std::make_unique<onnx::ModelProto>();
  if (bytes.size() > INT_MAX ||
      !g.model->ParseFromArray(bytes.data(), (int)bytes.size()))
    return emitError(loc, "not a valid ONNX protobuf (truncated or corrupt "
                          "file; weights over 2 GB must use external data)");
  const onnx::ModelProto &m = *g.model;
  if (!m.has_graph())
    return emitError(loc, "the model has no graph");
  if (m.ir_version() < kMinIrVersion || m.ir_version() > kMaxIrVersion)
    return emitError(loc, "ONNX IR version ")
           << m.ir_version()
           << " is not supported (supported: " << kMinIrVersion << " to "
           << kMaxIrVersion << ")";
  for (const auto &op : m.opset_import()) {
    if (isDefaultDomain(op.domain())) {
      g.opset = op.version();
      if (g.opset < kMinOpset || g.opset > kMaxOpset)
        return emitError(loc, "default-domain opset ")
               << g.opset << " is not supported (supported: " << kMinOpset
               << " to " << kMaxOpset << ")";
    }
  }
  if (g.opset == 0)
    return emitError(loc, "opset_import names no default-domain opset");

  const onnx::GraphProto &graph = m.graph();
  g.graph = &graph;

  // Every value name is defined once: by an initializer, a graph input or a
  // node output. A graph input may repeat an initializer (IR < 4 style).
  llvm::StringMap<int> producer; // value -> node index, -1 for graph values
  for (const auto &init : graph.initializer()) {
    if (init.name().empty())
      return emitError(loc, "an initializer has an empty name");
    if (!producer.try_emplace(init.name(), -1).second)
      return emitError(loc, "duplicate initializer name '")
             << init.name() << "'";
  }
  llvm::StringSet<> inputs;
  for (const auto &in : graph.input()) {
    if (!inputs.insert(in.name()).second)
      return emitError(loc, "duplicate graph input '") << in.name() << "'";
    producer.try_emplace(in.name(), -1);
  }
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto &node = graph.node(i);
    if (!isDefaultDomain(node.domain()))
      return emitError(loc, describeNode(node, i))
             << ": unknown operator domain '" << node.domain() << "'";
    for (const std::string &out : node.output()) {
      if (out.empty())
        continue;
      auto [it, inserted] = producer.try_emplace(out, i);
      if (!inserted)
        return emitError(loc, describeNode(node, i))
               << ": output '" << out
               << "' duplicates a value name already defined "
               << (it->second < 0 ? "by a graph input or initializer"
                                  : "by " + describeNode(graph.node(it->second),
                                                         it->second));
    }
  }

  // Kahn's algorithm: a node is ready once all its producers are placed.
  std::vector<int> pending(graph.node_size(), 0);
  std::vector<std::vector<int>> consumers(graph.node_size());
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto &node = graph.node(i);
    for (const std::string &in : node.input()) {
      if (in.empty())
        continue;
      auto it = producer.find(in);
      if (it == producer.end())
        return emitError(loc, describeNode(node, i))
               << ": input '" << in
               << "' is not produced by any node, graph input or initializer";
      ++g.uses[in];
      if (it->second >= 0) {
        ++pending[i];
        consumers[it->second].push_back(i);
      }
    }
  }
  std::deque<int> ready;
  for (int i = 0; i < graph.node_size(); ++i)
    if (pending[i] == 0)
      ready.push_back(i);
  while (!ready.empty()) {
    int i = ready.front();
    ready.pop_front();
    g.order.push_back(i);
    for (int c : consumers[i])
      if (--pending[c] == 0)
        ready.push_back(c);
  }
  if ((int)g.order.size() != graph.node_size()) {
    for (int i = 0; i < graph.node_size(); ++i)
      if (pending[i] > 0)
        return emitError(loc, "the graph has a cycle through ")
               << describeNode(graph.node(i), i);
  }

  if (graph.output_size() == 0)
    return emitError(loc, "the graph has no outputs");
  for (const auto &out : graph.output()) {
    if (!producer.count(out.name()))
      return emitError(loc, "graph output '")
             << out.name()
             << "' is not produced by any node, graph input or initializer";
    ++g.uses[out.name()];
  }
  return g;
}
