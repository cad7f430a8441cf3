// Entry point of the `hippo` binary; everything else lives in api/cli/cli.cpp.
#include "api/cli/cli.h"

#include <iostream>

int main(int argc, char** argv) { return hippo::cli::run(argc, argv, std::cout, std::cerr); }
