// jsonschema.cc — the C face of valijson (JSON Schema draft-07) over
// nlohmann-json; see jsonschema.h.  Every entry point catches every C++
// exception (bad_alloc included) and turns it into an sbx_error: nothing
// unwinds into C.
// Without it valijson calls abort() on a schema it cannot use: one bad
// input_schema would take the daemon down.
#define VALIJSON_USE_EXCEPTIONS 1

extern "C" {
#include "common/err.h" // a C header without its own extern "C"
}
#include "core/jsonschema.h"

#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <new>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>
#include <vector>

using json = nlohmann::json;

struct sbx_jdoc {
  json root;
};

struct sbx_jschema {
  valijson::Schema schema;
};

namespace
{

const char PATTERN_KEY[] = "x-sandboxd-pattern";
const size_t MAX_PATTERN_SUBJECT = 4096; // see SafePattern

// Nesting depth of JSON text, counted on the bytes before any parser runs,
// so a depth bomb costs one linear scan and no recursion.
bool depth_within(const char *t, size_t n, int max)
{
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < n; i++) {
    char c = t[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max)
        return false;
    } else if (c == ']' || c == '}') {
      depth--;
    }
  }
  return true;
}

// The value at JSON pointer `at`, or nullptr when absent or malformed.
const json *value_at(const json &root, const char *at)
{
  if (!at || !*at)
    return &root;
  json::json_pointer p(at);
  if (!root.contains(p))
    return nullptr;
  return &root.at(p);
}

std::string escape_token(const std::string &s)
{
  std::string out;
  for (char c : s) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

// valijson names each step of the path "[name]" or "[index]", from "<root>".
std::string pointer_of(const std::string &base, const std::vector<std::string> &context)
{
  std::string out = base;
  for (size_t i = 1; i < context.size(); i++) {
    const std::string &step = context[i];
    if (step.size() >= 2 && step.front() == '[' && step.back() == ']')
      out += "/" + escape_token(step.substr(1, step.size() - 2));
    else
      out += "/" + escape_token(step);
  }
  return out;
}

// valijson reports a failure at every level above the one at fault; those
// summaries repeat what the leaf says, so they are left out.
bool is_summary(const std::string &m)
{
  static const char *const prefixes[] = {
      "Failed to validate against schema associated with property name",
      "Failed to validate against schema associated with pattern",
      "Failed to validate against additional properties schema",
      "Failed to validate item #",
      "Failed to validate against child schema #",
  };
  for (const char *p : prefixes)
    if (m.rfind(p, 0) == 0)
      return true;
  return false;
}

// French by the kind of message: the English sentence's fixed start is
// replaced, the quoted names and numbers that follow are kept; a message of
// an unknown kind gets a generic French sentence with the English appended.
std::string french(const std::string &en, const std::string &path)
{
  static const char *const starts[][2] = {
      {"Missing required property '", "Propriété obligatoire manquante : '"},
      {"Value type not permitted by 'type' constraint.",
       "Type de valeur non permis par la contrainte 'type'."},
      {"Object contains a property that could not be validated using 'properties' or "
       "'additionalProperties' constraints: '",
       "L'objet contient une propriété non autorisée : '"},
      {"Failed to match expected value set by 'const' constraint.",
       "La valeur ne correspond pas à la constante attendue ('const')."},
      {"Failed to match against any enum values.",
       "La valeur ne fait pas partie des valeurs permises ('enum')."},
      {"Failed to match regex specified by 'pattern' constraint.",
       "La chaîne ne correspond pas à l'expression régulière ('pattern')."},
      {"Failed to validate against exactly one child schema.",
       "La valeur ne satisfait pas exactement un des schémas ('oneOf')."},
      {"Failed to validate against any child schemas allowed by oneOf constraint.",
       "La valeur ne satisfait aucun des schémas ('oneOf')."},
      {"Failed to validate against any schemas allowed by anyOf constraint.",
       "La valeur ne satisfait aucun des schémas ('anyOf')."},
      {"Target should not validate against schema specified in 'not' constraint.",
       "La valeur ne doit pas satisfaire le schéma de 'not'."},
      {"Failed to validate against a conditional schema set by if-then-else constraints.",
       "La valeur ne satisfait pas le schéma conditionnel (if/then/else)."},
      {"Failed to validate against dependent schema.",
       "La valeur ne satisfait pas le schéma de dépendance."},
      {"Missing dependency '", "Dépendance manquante : '"},
      {"String should be no more than ", "La chaîne doit compter au plus "},
      {"String should be no fewer than ", "La chaîne doit compter au moins "},
      {"Array should contain no more than ", "Le tableau doit contenir au plus "},
      {"Array should contain no fewer than ", "Le tableau doit contenir au moins "},
      {"Object should have no more than ", "L'objet doit avoir au plus "},
      {"Object should have no fewer than ", "L'objet doit avoir au moins "},
      {"Expected number less than or equal to ", "Nombre attendu inférieur ou égal à "},
      {"Expected number less than ", "Nombre attendu strictement inférieur à "},
      {"Expected number greater than or equal to ", "Nombre attendu supérieur ou égal à "},
      {"Expected number greater than ", "Nombre attendu strictement supérieur à "},
      {"Value should be a multiple of ", "La valeur doit être un multiple de "},
      {"Array contains more items than allowed by items constraint.",
       "Le tableau contient plus d'éléments que 'items' n'en permet."},
  };
  static const char *const ends[][2] = {
      {" characters in length.", " caractères."},
      {" elements.", " éléments."},
      {" properties.", " propriétés."},
  };
  if (en.rfind("String of ", 0) == 0) // SafePattern's refusal
    return "Chaîne de " + std::to_string(std::strtoull(en.c_str() + 10, nullptr, 10)) +
           " octets, trop longue pour être comparée à 'pattern' (au plus " +
           std::to_string(MAX_PATTERN_SUBJECT) + ").";
  for (const auto &s : starts) {
    size_t n = strlen(s[0]);
    if (en.compare(0, n, s[0]) != 0)
      continue;
    std::string rest = en.substr(n);
    for (const auto &e : ends) {
      size_t m = strlen(e[0]);
      if (rest.size() >= m && rest.compare(rest.size() - m, m, e[0]) == 0) {
        rest = rest.substr(0, rest.size() - m) + e[1];
        break;
      }
    }
    return s[1] + rest;
  }
  return "Valeur invalide en « " + (path.empty() ? std::string("/") : path) + " » : " + en;
}

struct Violation {
  std::string path, en, fr;
};

void report(std::vector<Violation> &out, const std::string &path, const std::string &en,
            const std::string &fr)
{
  out.push_back({path, en, fr});
}

// The $ref check of a caller's schema.  Schema positions are found from the
// root through every keyword that holds a schema and through every $ref
// target; "in place" edges ($ref, allOf/anyOf/oneOf, not, if/then/else,
// schema dependencies) apply a schema to the same value, so a loop of them
// never ends (and valijson's parser recurses for ever on a loop of bare
// $refs).  Loops through properties/items descend into the value and end
// with it.
class RefCheck
{
public:
  RefCheck(const json &root, const std::string &base) : root_(root), base_(base) {}

  // Every schema position found (JSON pointers relative to the root).
  std::set<std::string> seen{""};

  void run(std::vector<Violation> &out)
  {
    std::deque<std::string> todo{""};
    while (!todo.empty()) {
      std::string ptr = todo.front();
      todo.pop_front();
      std::vector<std::string> inplace, below;
      children(ptr, inplace, below, out);
      for (auto *list : {&inplace, &below})
        for (const std::string &c : *list)
          if (seen.insert(c).second)
            todo.push_back(c);
      edges_[ptr] = inplace;
    }
    find_loop(out);
  }

private:
  const json &root_;
  std::string base_;
  std::map<std::string, std::vector<std::string>> edges_;

  const json *node(const std::string &ptr) const
  {
    json::json_pointer p(ptr);
    return root_.contains(p) ? &root_.at(p) : nullptr;
  }

  void children(const std::string &ptr, std::vector<std::string> &inplace,
                std::vector<std::string> &below, std::vector<Violation> &out)
  {
    const json *n = node(ptr);
    if (!n || !n->is_object())
      return;
    auto ref = n->find("$ref");
    if (ref != n->end() && ref->is_string()) {
      std::string target;
      if (resolve(ref->get<std::string>(), ptr, target, out))
        inplace.push_back(target);
    }
    for (const char *k : {"properties", "patternProperties", "definitions"}) {
      auto it = n->find(k);
      if (it != n->end() && it->is_object())
        for (auto &el : it->items())
          below.push_back(ptr + "/" + k + "/" + escape_token(el.key()));
    }
    for (const char *k :
         {"additionalItems", "additionalProperties", "contains", "propertyNames"})
      if (n->contains(k))
        below.push_back(ptr + "/" + k);
    auto items = n->find("items");
    if (items != n->end()) {
      if (items->is_array())
        for (size_t i = 0; i < items->size(); i++)
          below.push_back(ptr + "/items/" + std::to_string(i));
      else
        below.push_back(ptr + "/items");
    }
    for (const char *k : {"not", "if", "then", "else"})
      if (n->contains(k))
        inplace.push_back(ptr + "/" + k);
    for (const char *k : {"allOf", "anyOf", "oneOf"}) {
      auto it = n->find(k);
      if (it != n->end() && it->is_array())
        for (size_t i = 0; i < it->size(); i++)
          inplace.push_back(ptr + "/" + k + "/" + std::to_string(i));
    }
    auto deps = n->find("dependencies");
    if (deps != n->end() && deps->is_object())
      for (auto &el : deps->items())
        if (!el.value().is_array())
          inplace.push_back(ptr + "/dependencies/" + escape_token(el.key()));
  }

  bool resolve(const std::string &ref, const std::string &at, std::string &target,
               std::vector<Violation> &out)
  {
    std::string path = base_ + at + "/$ref";
    if (ref.empty() || ref[0] != '#') {
      report(out, path,
             "$ref '" + ref + "' is not local: only \"#\" and \"#/...\" references are allowed",
             "$ref '" + ref +
                 "' n'est pas locale : seules les références « # » et « #/... » sont permises");
      return false;
    }
    target = ref.substr(1);
    while (!target.empty() && target.back() == '/')
      target.pop_back(); // as valijson does
    bool ok = target.find('%') == std::string::npos && (target.empty() || target[0] == '/');
    if (ok) {
      try {
        ok = node(target) != nullptr;
      } catch (const json::exception &) {
        ok = false;
      }
    }
    if (!ok)
      report(out, path, "$ref '" + ref + "' does not resolve in this schema",
             "$ref '" + ref + "' ne désigne rien dans ce schéma");
    return ok;
  }

  // Kahn's algorithm over the in-place edges: what cannot be peeled is on
  // a loop or below one; the first such schema that holds a $ref is named.
  void find_loop(std::vector<Violation> &out)
  {
    std::map<std::string, size_t> indegree;
    for (auto &e : edges_) {
      indegree.emplace(e.first, 0);
      for (auto &t : e.second)
        indegree[t]++;
    }
    std::deque<std::string> ready;
    for (auto &d : indegree)
      if (d.second == 0)
        ready.push_back(d.first);
    while (!ready.empty()) {
      std::string p = ready.front();
      ready.pop_front();
      indegree.erase(p);
      for (auto &t : edges_[p])
        if (--indegree[t] == 0)
          ready.push_back(t);
    }
    if (indegree.empty())
      return;
    std::string at = indegree.begin()->first;
    for (auto &d : indegree) {
      const json *n = node(d.first);
      if (n && n->is_object() && n->contains("$ref")) {
        at = d.first;
        break;
      }
    }
    report(out, base_ + at,
           "$ref loop: this schema applies itself to the same value again without end",
           "Boucle de $ref : ce schéma s'applique de nouveau à la même valeur, sans fin");
  }
};

// libstdc++'s std::regex matches by recursion, one frame per character for
// a repetition: a long enough string overflows the stack (a 200 KB
// metadata.name did).  So valijson never sees "pattern": each one is renamed
// to PATTERN_KEY, whose constraint refuses a string longer than
// MAX_PATTERN_SUBJECT before matching it.

class SafePattern : public valijson::constraints::PolyConstraint
{
public:
  explicit SafePattern(const std::string &pattern) : re_(pattern) {}

  bool validate(const valijson::adapters::Adapter &target,
                const std::vector<std::string> &context,
                valijson::ValidationResults *results) const override
  {
    if (!target.isString())
      return true;
    std::string s = target.asString();
    if (s.size() > MAX_PATTERN_SUBJECT) {
      if (results)
        results->pushError(context, "String of " + std::to_string(s.size()) +
                                        " bytes is too long to be matched against 'pattern' (at "
                                        "most " +
                                        std::to_string(MAX_PATTERN_SUBJECT) + ").");
      return false;
    }
    if (std::regex_search(s, re_))
      return true;
    if (results)
      results->pushError(context, "Failed to match regex specified by 'pattern' constraint.");
    return false;
  }

private:
  std::regex re_;

  valijson::constraints::Constraint *cloneInto(void *where) const override
  {
    return new (where) SafePattern(*this);
  }
  size_t sizeOf() const override { return sizeof(SafePattern); }
};

class SafePatternBuilder : public valijson::ConstraintBuilder
{
public:
  valijson::constraints::Constraint *
  make(const valijson::adapters::Adapter &value) const override
  {
    std::string pattern;
    if (!value.getString(pattern))
      throw std::runtime_error("'pattern' must be a string");
    return new SafePattern(pattern);
  }
};

// Parses the schema v (already through RefCheck, whose positions are
// `seen`) into schema, with every "pattern" at a schema position renamed.
void parse_schema(const json &v, const std::set<std::string> &seen, valijson::Schema &schema)
{
  json copy = v;
  for (const std::string &ptr : seen) {
    json::json_pointer p(ptr);
    if (!copy.contains(p))
      continue;
    json &n = copy.at(p);
    auto it = n.is_object() ? n.find("pattern") : n.end();
    if (n.is_object() && it != n.end() && it->is_string()) {
      n[PATTERN_KEY] = *it;
      n.erase("pattern");
    }
  }
  valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
  parser.addConstraintBuilder(PATTERN_KEY, new SafePatternBuilder);
  valijson::adapters::NlohmannJsonAdapter adapter(copy);
  parser.populateSchema(adapter, schema);
}

int fail(sbx_error *err, sbx_errcode code, const std::string &en, const std::string &fr)
{
  sbx_err_set(err, code, 0, "%s", en.c_str());
  if (!fr.empty())
    sbx_err_fr(err, "%s", fr.c_str());
  return -1;
}

int fail_exception(sbx_error *err, const char *what)
{
  return fail(err, SBX_E_INTERNAL, std::string("JSON schema validator: ") + what, "");
}

// The exception boundary of an entry point that returns a count: body's
// result, or -1 with err for whatever it threw.
template <typename F> int guarded(sbx_error *err, F body)
{
  try {
    return body();
  } catch (const std::exception &e) {
    return fail_exception(err, e.what());
  } catch (...) {
    return fail_exception(err, "unknown exception");
  }
}

void deliver(const std::vector<Violation> &v, sbx_jschema_violation_fn fn, void *ctx)
{
  for (const Violation &x : v)
    fn(ctx, x.path.c_str(), x.en.c_str(), x.fr.c_str());
}

} // namespace

extern "C" {

struct sbx_jdoc *sbx_jdoc_parse(const char *text, size_t len, struct sbx_error *err)
{
  if (!depth_within(text, len, SBX_JSCHEMA_MAX_DEPTH)) {
    fail(err, SBX_E_INVALID,
         "the document nests deeper than " + std::to_string(SBX_JSCHEMA_MAX_DEPTH) +
             " levels of arrays and objects: refused before validation",
         "le document imbrique plus de " + std::to_string(SBX_JSCHEMA_MAX_DEPTH) +
             " niveaux de tableaux et d'objets : refusé avant validation");
    return nullptr;
  }
  try {
    auto *d = new sbx_jdoc;
    try {
      d->root = json::parse(text, text + len);
    } catch (const json::parse_error &e) {
      delete d;
      fail(err, SBX_E_INVALID, std::string("the body is not JSON: ") + e.what(),
           std::string("le corps n'est pas du JSON : ") + e.what());
      return nullptr;
    }
    return d;
  } catch (const std::exception &e) {
    fail_exception(err, e.what());
  } catch (...) {
    fail_exception(err, "unknown exception");
  }
  return nullptr;
}

void sbx_jdoc_free(struct sbx_jdoc *d) { delete d; }

int sbx_jdoc_is_object(const struct sbx_jdoc *d, const char *at)
{
  try {
    const json *v = value_at(d->root, at);
    return v && v->is_object();
  } catch (...) {
    return 0;
  }
}

int sbx_jdoc_string(const struct sbx_jdoc *d, const char *at, char *buf, size_t size)
{
  try {
    const json *v = value_at(d->root, at);
    if (!v || !v->is_string())
      return -1;
    const std::string &s = v->get_ref<const std::string &>();
    if (s.size() >= size || s.find('\0') != std::string::npos)
      return -1;
    memcpy(buf, s.c_str(), s.size() + 1);
    return 0;
  } catch (...) {
    return -1;
  }
}

int sbx_jschema_check_schema(const struct sbx_jdoc *d, const char *at,
                             sbx_jschema_violation_fn fn, void *ctx, struct sbx_error *err)
{
  return guarded(err, [&]() -> int {
    const json *v = value_at(d->root, at);
    if (!v)
      return 0;
    std::vector<Violation> out;
    RefCheck refs(*v, at ? at : "");
    refs.run(out);
    if (out.empty()) {
      valijson::Schema schema;
      try {
        parse_schema(*v, refs.seen, schema);
      } catch (const std::bad_alloc &) {
        throw;
      } catch (const std::exception &e) {
        report(out, at ? at : "", std::string("not a usable schema: ") + e.what(),
               std::string("schéma inutilisable : ") + e.what());
      }
    }
    deliver(out, fn, ctx);
    return (int)out.size();
  });
}

struct sbx_jschema *sbx_jschema_compile(const struct sbx_jdoc *d, const char *at,
                                        struct sbx_error *err)
{
  try {
    const json *v = value_at(d->root, at);
    if (!v) {
      fail(err, SBX_E_INVALID, std::string("no schema at ") + (at ? at : ""), "");
      return nullptr;
    }
    std::vector<Violation> out;
    RefCheck refs(*v, at ? at : "");
    refs.run(out);
    if (!out.empty()) {
      fail(err, SBX_E_INVALID, out[0].path + ": " + out[0].en, out[0].path + " : " + out[0].fr);
      return nullptr;
    }
    auto *s = new sbx_jschema;
    try {
      parse_schema(*v, refs.seen, s->schema);
    } catch (...) {
      delete s;
      throw;
    }
    return s;
  } catch (const std::bad_alloc &e) {
    fail_exception(err, e.what());
  } catch (const std::exception &e) {
    fail(err, SBX_E_INVALID, std::string("not a usable schema: ") + e.what(),
         std::string("schéma inutilisable : ") + e.what());
  } catch (...) {
    fail_exception(err, "unknown exception");
  }
  return nullptr;
}

void sbx_jschema_free(struct sbx_jschema *s) { delete s; }

int sbx_jschema_validate(const struct sbx_jschema *s, const struct sbx_jdoc *d, const char *at,
                         sbx_jschema_violation_fn fn, void *ctx, struct sbx_error *err)
{
  return guarded(err, [&]() -> int {
    const json *v = value_at(d->root, at);
    if (!v)
      return 0;
    valijson::Validator validator;
    valijson::ValidationResults results;
    valijson::adapters::NlohmannJsonAdapter adapter(*v);
    if (validator.validate(s->schema, adapter, &results))
      return 0;
    std::vector<Violation> out, summaries;
    valijson::ValidationResults::Error e;
    std::set<std::pair<std::string, std::string>> seen;
    while (results.popError(e)) {
      std::string path = pointer_of(at ? at : "", e.context);
      if (!seen.insert({path, e.description}).second)
        continue;
      report(is_summary(e.description) ? summaries : out, path, e.description,
             french(e.description, path));
    }
    // A `false` schema fails without a message of its own: then the
    // summaries are all there is to say.
    if (out.empty())
      out.swap(summaries);
    if (out.empty()) // a bare `false` reached through $ref says nothing at all
      report(out, at ? at : "", "The value is not allowed by the schema.",
             "La valeur n'est pas permise par le schéma.");
    deliver(out, fn, ctx);
    return (int)out.size();
  });
}

} // extern "C"
