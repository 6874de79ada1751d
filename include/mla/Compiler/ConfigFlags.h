//===- ConfigFlags.h - DecodePipelineOptions as command-line flags -*- C++ -*-===//
//
// mla-compile and mla-run take a decode's configuration as flags with the
// names of DecodePipelineOptions' textual options (--target, --splits,
// --kv-tile, ...), so a configuration tried in mla-opt can be packed and run
// as it is. test/tools/config-flags.test keeps the three in step.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_COMPILER_CONFIGFLAGS_H
#define MLA_COMPILER_CONFIGFLAGS_H

#include "mla/Transforms/Passes.h"

#include "llvm/Support/CommandLine.h"

namespace mla {

class ConfigFlags {
public:
  /// Declares the flags in `category`; construct before parsing.
  explicit ConfigFlags(llvm::cl::OptionCategory &category);

  /// The options the flags give. Their values are checked where every
  /// surface checks them: the config attribute and mla-select-config.
  DecodePipelineOptions options() const;
  /// Whether any configuration flag was given; whether --target was.
  bool anyGiven() const;
  bool targetGiven() const { return target.getNumOccurrences() > 0; }

private:
  llvm::cl::opt<std::string> target;
  llvm::cl::opt<int64_t> splits, kvTile, headsPerWorkgroup, wavesPerWorkgroup,
      wavesPerRowGroup, rowsPerWave, pipelineStages, queryTokens;
};

} // namespace mla

#endif // MLA_COMPILER_CONFIGFLAGS_H
