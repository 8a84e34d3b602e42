// The kiln command line. Subcommands arrive with their issues (opt, zoo, run, breaks, dump,
// bench, aot); for now it reports its version and what it was built with.
#include <cstring>
#include <iostream>

#include <kiln/kiln.h>

int main(int argc, char** argv) {
  if (argc >= 2 &&
      (std::strcmp(argv[1], "version") == 0 || std::strcmp(argv[1], "--version") == 0)) {
    std::cout << "kiln " << kiln::version() << "\n";
    return 0;
  }
  std::cerr << "usage: kiln version\n"
               "(the opt, zoo, run, breaks, dump, bench and aot subcommands are not built yet)\n";
  return argc >= 2 ? 2 : 0;
}
