// advisor: plan 4D-parallel (AxoNN-style) training of GPT models.
#include <iostream>

#include "advisor/cli/subcommands.hpp"
#include "advisor/core/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"advisor: which 4D grid, placement, micro-batch and overlap train a GPT model fastest"};
  ff::advisor::setup_all(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  } catch (const ff::NoConfigError& e) {
    std::cerr << "advisor: " << e.what() << "\n";
    return 3;
  } catch (const ff::InputError& e) {
    std::cerr << "advisor: error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
