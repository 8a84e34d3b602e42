// KILN_LOGS: the known log names, and the unknown ones that are warned about.
#include <catch2/catch.hpp>

#include "runtime/logs.h"

using namespace kiln;

TEST_CASE("KILN_LOGS lists: unknown names are found, known ones and +all are not", "[logs]") {
  CHECK(unknown_logs("").empty());
  CHECK(unknown_logs("passes,cache, +fusion ,all").empty());
  CHECK(unknown_logs("+all").empty());
  CHECK(unknown_logs("pases,cache,graph-breaks") ==
        std::vector<std::string>{"pases", "graph-breaks"});
  for (const char* name : {"graph", "passes", "graph_breaks", "guards", "recompiles", "fusion",
                           "lower", "cache", "all"})
    CHECK(std::find(known_logs().begin(), known_logs().end(), name) != known_logs().end());
  CHECK(log_list_has("fusion,cache", "cache"));
  CHECK_FALSE(log_list_has("fusion,pases", "passes"));
}
