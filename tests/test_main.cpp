// The doctest runner of unit_tests; the tests are in test_*.cpp.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
