#pragma once
#include <string>

namespace ff {

// Writes `content` to `path` through a temporary file in the same directory
// and a rename, so a reader never sees half a file, with Ctrl-C and SIGTERM
// held back until the rename is done; throws InputError.
void write_file_atomic(const std::string& path, const std::string& content);

}  // namespace ff
