//===- ConfigFlags.cpp - DecodePipelineOptions as command-line flags ------===//

#include "mla/Compiler/ConfigFlags.h"

using namespace mla;
namespace cl = llvm::cl;

ConfigFlags::ConfigFlags(cl::OptionCategory &category)
    : target("target",
             cl::desc("Chip the kernels and work lists are for: gfx950 (= "
                      "mi355x), sm_90a (= h200; h100) or host"),
             cl::init(defaultTargetName().str()), cl::cat(category)),
      splits("splits",
             cl::desc("Work items per sequence, 1..64 (default: the "
                      "balanced planner)"),
             cl::init(-1), cl::cat(category)),
      kvTile("kv-tile",
             cl::desc("KV rows per tile, a power of two (default: the "
                      "config's choice)"),
             cl::init(0), cl::cat(category)),
      headsPerWorkgroup("heads-per-workgroup",
                        cl::desc("Heads of the block a workgroup's query rows "
                                 "come from (default: all H)"),
                        cl::init(0), cl::cat(category)),
      wavesPerWorkgroup("waves-per-workgroup",
                        cl::desc("Waves per workgroup (default: the config's "
                                 "choice)"),
                        cl::init(0), cl::cat(category)),
      wavesPerRowGroup("waves-per-row-group",
                       cl::desc("Waves sharing one group of query rows: "
                                "1, 2 or 4 (default: the config's choice)"),
                       cl::init(0), cl::cat(category)),
      rowsPerWave("rows-per-wave",
                  cl::desc("Query rows of a row group, 16 or 32 (default: "
                           "the config's choice)"),
                  cl::init(0), cl::cat(category)),
      pipelineStages("pipeline-stages",
                     cl::desc("KV tiles in flight (default: the config's "
                              "choice)"),
                     cl::init(0), cl::cat(category)),
      queryTokens("query-tokens",
                  cl::desc("Query tokens per sequence the defaults are "
                           "chosen for, 1..4 (every launch still takes "
                           "1..4; default 1)"),
                  cl::init(1), cl::cat(category)) {}

bool ConfigFlags::anyGiven() const {
  return target.getNumOccurrences() || splits.getNumOccurrences() ||
         kvTile.getNumOccurrences() || headsPerWorkgroup.getNumOccurrences() ||
         wavesPerWorkgroup.getNumOccurrences() ||
         wavesPerRowGroup.getNumOccurrences() ||
         rowsPerWave.getNumOccurrences() ||
         pipelineStages.getNumOccurrences() || queryTokens.getNumOccurrences();
}

DecodePipelineOptions ConfigFlags::options() const {
  DecodePipelineOptions options;
  options.target = target.getValue();
  options.splits = splits.getValue();
  options.kvTile = kvTile.getValue();
  options.headsPerWorkgroup = headsPerWorkgroup.getValue();
  options.wavesPerWorkgroup = wavesPerWorkgroup.getValue();
  options.wavesPerRowGroup = wavesPerRowGroup.getValue();
  options.rowsPerWave = rowsPerWave.getValue();
  options.pipelineStages = pipelineStages.getValue();
  options.queryTokens = queryTokens.getValue();
  return options;
}
