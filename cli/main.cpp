// roundscope: the command-line front end (docs/cli.md is its contract; cli/app.cpp runs it).
#include "cli/commands.hpp"

int main(int argc, char** argv) { return roundscope::cli::run_cli(argc, argv); }
