// symbolize_types: C++ types, parameter lists and template arguments spelled
// from DWARF as the demangler (libiberty, __cxa_demangle) spells them, so a
// name rebuilt from DWARF equals the one the symbol table would give: GCC's
// DWARF says "long unsigned int" and "vector<long unsigned int>", the
// demangler "unsigned long" and "std::vector<unsigned long>".
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "symbolize_namer.h"

namespace symbolize {
namespace internal {

namespace {

// GCC's names of base types, in the demangler's spelling.
const char* const kBaseTypes[][2] = {
    {"long unsigned int", "unsigned long"}, {"long int", "long"},
    {"short int", "short"}, {"short unsigned int", "unsigned short"},
    {"long long int", "long long"}, {"long long unsigned int", "unsigned long long"},
    {"__int128 unsigned", "unsigned __int128"}, {"_Bool", "bool"}};

const char* base_name(const char* n) {
  for (const auto& b : kBaseTypes)
    if (std::strcmp(n, b[0]) == 0) return b[1];
  return n;
}

// How the demangler writes an integer template argument of a type: 3,
// 3u, 3l, 3ul, 3ll, 3ull; any other integral type as a cast, (char)65.
const char* const kLiteralSuffix[][2] = {
    {"int", ""}, {"unsigned int", "u"}, {"long", "l"}, {"unsigned long", "ul"},
    {"long long", "ll"}, {"unsigned long long", "ull"}};

void skip_qualifiers(Dwarf_Die* t) {
  while ((dw().dwarf_tag(t) == DW_TAG_const_type || dw().dwarf_tag(t) == DW_TAG_volatile_type ||
          dw().dwarf_tag(t) == DW_TAG_typedef) &&
         ref(t, DW_AT_type, t)) {
  }
}

}  // namespace

bool Namer::type(Dwarf_Die* t, const std::string& decl, std::string* out) {
  Deeper guard(this);
  Dwarf_Die next;
  const bool has_next = ref(t, DW_AT_type, &next);
  if (guard.too_deep()) return false;
  switch (dw().dwarf_tag(t)) {
    case DW_TAG_pointer_type:
      return has_next ? type(&next, "*" + decl, out) : (*out = "void*" + decl, true);
    case DW_TAG_reference_type: return has_next && type(&next, "&" + decl, out);
    case DW_TAG_rvalue_reference_type: return has_next && type(&next, "&&" + decl, out);
    case DW_TAG_const_type:
      return has_next ? type(&next, " const" + decl, out) : (*out = "void const" + decl, true);
    case DW_TAG_volatile_type:
      return has_next ? type(&next, " volatile" + decl, out) : (*out = "void volatile" + decl, true);
    case DW_TAG_typedef:
      if (!has_next) return *out = "void" + decl, true;
      // typedef struct {...} T: the type is called T (in its mangled name too).
      if (is_type(dw().dwarf_tag(&next)) && !name_of(&next)) {
        if (!prefix(t, out) || !name_of(t)) return false;
        return *out += name_of(t) + decl, true;
      }
      return type(&next, decl, out);
    case DW_TAG_subroutine_type: {
      std::string ret = "void", args;
      bool is_const;
      if ((has_next && !type(&next, "", &ret)) || !params(t, &args, &is_const)) return false;
      *out = ret + " (" + decl + ")(" + args + ")";
      return true;
    }
    case DW_TAG_array_type: {  // int (&) [4][2]
      std::string elem, dims;
      Dwarf_Die c;
      if (!has_next || !type(&next, "", &elem) || dw().dwarf_child(t, &c) != 0) return false;
      do {
        Dwarf_Attribute a;
        Dwarf_Word n;
        if (dw().dwarf_tag(&c) != DW_TAG_subrange_type) continue;
        if (dw().dwarf_formudata(dw().dwarf_attr(&c, DW_AT_count, &a), &n) != 0) {
          if (dw().dwarf_formudata(dw().dwarf_attr(&c, DW_AT_upper_bound, &a), &n) != 0) return false;
          ++n;
        }
        dims += "[" + std::to_string(n) + "]";
      } while (dw().dwarf_siblingof(&c, &c) == 0);
      *out = elem + (decl.empty() ? "" : " (" + decl + ")") + " " + dims;
      return !dims.empty();
    }
    case DW_TAG_base_type:
    case DW_TAG_unspecified_type: {
      const char* n = name_of(t);
      if (!n) return false;
      *out = base_name(n) + decl;
      return true;
    }
    default:
      if (!is_type(dw().dwarf_tag(t)) || !type_name(t, out)) return false;
      *out += decl;
      return true;
  }
}

bool Namer::params(Dwarf_Die* fn, std::string* out, bool* is_const) {
  Dwarf_Die c;
  out->clear();
  *is_const = false;
  if (dw().dwarf_child(fn, &c) != 0) return true;
  bool first = true;
  do {
    const int tag = dw().dwarf_tag(&c);
    std::string p;
    Dwarf_Die t;
    if (tag == DW_TAG_unspecified_parameters) {
      p = "...";
    } else if (tag != DW_TAG_formal_parameter) {
      continue;
    } else if (!ref(&c, DW_AT_type, &t)) {
      return false;
    } else if (dw().dwarf_hasattr(&c, DW_AT_artificial)) {
      // The object pointer: a const member function's points to const.
      Dwarf_Die pointee;
      while (dw().dwarf_tag(&t) == DW_TAG_const_type && ref(&t, DW_AT_type, &t)) {}
      if (dw().dwarf_tag(&t) == DW_TAG_pointer_type && ref(&t, DW_AT_type, &pointee))
        *is_const = dw().dwarf_tag(&pointee) == DW_TAG_const_type;
      continue;
    } else {
      // A parameter's own const is not part of the function's type.
      while ((dw().dwarf_tag(&t) == DW_TAG_const_type || dw().dwarf_tag(&t) == DW_TAG_volatile_type) &&
             ref(&t, DW_AT_type, &t)) {}
      if (!type(&t, "", &p)) return false;
    }
    *out += (first ? "" : ", ") + p;
    first = false;
  } while (dw().dwarf_siblingof(&c, &c) == 0);
  return true;
}

bool Namer::template_value(Dwarf_Die* param, std::string* out) {
  Dwarf_Die t;
  Dwarf_Attribute a;
  Dwarf_Word v, size = 8;
  if (!ref(param, DW_AT_type, &t)) return false;
  skip_qualifiers(&t);
  const char* n = dw().dwarf_tag(&t) == DW_TAG_base_type ? name_of(&t) : nullptr;
  if (!n || dw().dwarf_formudata(dw().dwarf_attr(param, DW_AT_const_value, &a), &v) != 0) return false;
  n = base_name(n);
  if (std::strcmp(n, "bool") == 0) return *out = v ? "true" : "false", true;
  dw().dwarf_formudata(dw().dwarf_attr(&t, DW_AT_byte_size, &a), &size);
  const bool is_signed = std::strncmp(n, "unsigned", 8) != 0 && std::strcmp(n, "char8_t") != 0 &&
                         std::strcmp(n, "char16_t") != 0 && std::strcmp(n, "char32_t") != 0;
  char num[32];
  if (is_signed && size > 0 && size < 8) {  // the value was stored in size bytes
    const int shift = static_cast<int>(64 - 8 * size);
    std::snprintf(num, sizeof num, "%" PRId64, static_cast<int64_t>(v << shift) >> shift);
  } else {
    std::snprintf(num, sizeof num, is_signed ? "%" PRId64 : "%" PRIu64, v);
  }
  for (const auto& s : kLiteralSuffix)
    if (std::strcmp(n, s[0]) == 0) return *out = std::string(num) + s[1], true;
  *out = "(" + std::string(n) + ")" + num;
  return true;
}

std::string Namer::with_template_args(Dwarf_Die* die, const char* name) {
  const char* lt = std::strncmp(name, "operator", 8) != 0 ? std::strchr(name, '<')
                   : std::strncmp(name, "operator()<", 11) == 0 ? name + 10
                                                               : nullptr;
  Dwarf_Die c;
  if (!lt || dw().dwarf_child(die, &c) != 0) return name;
  std::string args;
  const char* prev = nullptr;
  bool any = false;
  do {
    const int tag = dw().dwarf_tag(&c);
    std::string a;
    Dwarf_Die t;
    const char* n = name_of(&c);
    if (n && prev && std::strcmp(n, prev) == 0) continue;  // GCC repeats a generic lambda's auto:1
    prev = n;
    if (tag == DW_TAG_template_type_parameter) {
      if (!ref(&c, DW_AT_type, &t) || !type(&t, "", &a)) return name;
    } else if (tag == DW_TAG_template_value_parameter) {
      if (!template_value(&c, &a)) return name;
    } else if (tag == DW_TAG_GNU_template_parameter_pack || tag == DW_TAG_GNU_template_template_param) {
      return name;
    } else {
      continue;
    }
    args += (any ? ", " : "") + a;
    any = true;
  } while (dw().dwarf_siblingof(&c, &c) == 0);
  if (!any) return name;
  return std::string(name, lt) + "<" + args + (args.back() == '>' ? " >" : ">");
}

}  // namespace internal
}  // namespace symbolize
