// The generated category table and the White_Space list behind unicode_class().
#include "engine/tokenizer/unicode_classes.h"

#include <cstddef>

namespace hippo::tokenizer {
namespace {

#include "engine/tokenizer/unicode_class_table.inc"

bool is_white_space(std::uint32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

}  // namespace

std::uint8_t unicode_class(std::uint32_t cp) {
  const std::size_t block = kClassStage1[cp >> kClassBlockBits];
  std::uint8_t flags = kClassStage2[(block << kClassBlockBits) | (cp & ((1u << kClassBlockBits) - 1))];
  if (is_white_space(cp)) flags |= kClassSpace;
  return flags;
}

}  // namespace hippo::tokenizer
