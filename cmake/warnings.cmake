# Warnings, for every target of the project (not for imported ones). Warnings are errors in the
# project's own presets and in CI (PGOUTBOX_WERROR=ON there); a packager's or a newcomer's plain
# `cmake -B build -DCMAKE_BUILD_TYPE=Release` build keeps them as warnings, so a newer compiler's
# new diagnostic never breaks a release build.
option(PGOUTBOX_WERROR "Treat compiler warnings as errors" OFF)
add_compile_options(-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor)
# GCC 12 at -O3 reports -Wrestrict on std::string concatenation inside libstdc++'s own
# char_traits (GCC bug 105329, fixed in GCC 13): a false positive in code that is correct, so it
# is silenced for that compiler only.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  add_compile_options(-Wno-restrict)
endif()
if(PGOUTBOX_WERROR)
  add_compile_options(-Werror)
endif()

if(PGOUTBOX_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
