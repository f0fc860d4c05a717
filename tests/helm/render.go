// render.go — renders deploy/helm/sandboxd the way `helm template` does,
// offline, with Debian's Go packages only (no helm binary, no chart repo).
//
// Why this is faithful: Helm's engine (helm.sh/helm/v3/pkg/engine) is Go's
// text/template with sprig's TxtFuncMap (Debian ships sprig v3.2.3, the
// version Helm 3 vendored up to 3.16; 3.17 moved to 3.3.0, a superset), minus env/expandenv, plus the functions below,
// each written here as Helm writes it:
//
//	toYaml / fromYaml  sigs.k8s.io/yaml Marshal/Unmarshal (toYaml trims the final newline)
//	toJson             sprig's (encoding/json)
//	include            executes a named template into a string
//	tpl                parses a string against the chart's templates and executes it
//	required           fails with its message when the value is nil or ""
//	lookup             returns an empty map, as `helm template` does (no cluster)
//
// and with Helm's options: missingkey=zero, "<no value>" removed from the
// output, values coalesced over values.yaml (a null in a user file deletes
// the key), numbers from YAML as float64 (sigs.k8s.io/yaml reads through
// JSON, as Helm's chartutil.ReadValues does).  The chart must use nothing
// else: a function missing here fails the parse, so the test cannot pass
// on a chart Helm would render differently for want of a function.
// .Capabilities is minimal (KubeVersion and APIVersions.Has); .Files and
// subcharts are not implemented (the chart uses neither when rendered with
// postgresql.enabled=false; the bundled value set renders this chart's own
// objects only: Helm would first need `helm dependency update`, which needs
// the chart repository).
//
// usage: render -chart DIR [-f values.yaml]... [-name R] [-namespace NS] [-notes | -dump-values]
// Writes the rendered documents to stdout, each after a "# Source:" line.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig"
	"sigs.k8s.io/yaml"
)

type chartMeta struct {
	Name, Version, AppVersion, Description, Type, KubeVersion, Home, APIVersion string
}

type releaseMeta struct {
	Name, Namespace, Service string
	Revision                 int
	IsInstall, IsUpgrade     bool
}

type apiVersions []string

// Has reports whether the cluster serves a group/version (or group/version/Kind).
func (a apiVersions) Has(v string) bool {
	for _, x := range a {
		if x == v {
			return true
		}
	}
	return false
}

type kubeVersion struct{ Version, Major, Minor, GitVersion string }

type capabilities struct {
	KubeVersion kubeVersion
	APIVersions apiVersions
}

type templateMeta struct{ Name, BasePath string }

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

// coalesce merges src over dst as Helm does for user values: maps merge
// recursively, anything else replaces, and null deletes the key.
func coalesce(dst, src map[string]interface{}) map[string]interface{} {
	for k, v := range src {
		if v == nil {
			delete(dst, k)
			continue
		}
		sm, sok := v.(map[string]interface{})
		dm, dok := dst[k].(map[string]interface{})
		if sok && dok {
			dst[k] = coalesce(dm, sm)
		} else {
			dst[k] = v
		}
	}
	return dst
}

func readYAML(path string, into interface{}) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

type renderer struct {
	root  *template.Template
	depth int
}

const maxIncludeDepth = 1000 // Helm's recursion guard for include/tpl

func (r *renderer) funcs() template.FuncMap {
	f := sprig.TxtFuncMap()
	delete(f, "env")
	delete(f, "expandenv")
	f["toYaml"] = func(v interface{}) string {
		b, err := yaml.Marshal(v)
		if err != nil {
			return "" // Helm swallows the error the same way
		}
		return strings.TrimSuffix(string(b), "\n")
	}
	f["fromYaml"] = func(s string) map[string]interface{} {
		m := map[string]interface{}{}
		if err := yaml.Unmarshal([]byte(s), &m); err != nil {
			m["Error"] = err.Error()
		}
		return m
	}
	f["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil {
			return v, errors.New(msg)
		}
		if s, ok := v.(string); ok && s == "" {
			return v, errors.New(msg)
		}
		return v, nil
	}
	f["include"] = func(name string, data interface{}) (string, error) {
		r.depth++
		defer func() { r.depth-- }()
		if r.depth > maxIncludeDepth {
			return "", fmt.Errorf("rendering template has a nested reference name: %s", name)
		}
		var buf bytes.Buffer
		if err := r.root.ExecuteTemplate(&buf, name, data); err != nil {
			return "", err
		}
		return buf.String(), nil
	}
	f["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := r.root.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Parse(text)
		if err != nil {
			return "", err
		}
		var buf bytes.Buffer
		if err := t.Execute(&buf, data); err != nil {
			return "", err
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
	f["lookup"] = func(apiVersion, kind, namespace, name string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil
	}
	return f
}

func run() error {
	chartDir := flag.String("chart", "", "chart directory")
	name := flag.String("name", "sbx", "release name")
	ns := flag.String("namespace", "sandboxd", "release namespace")
	notes := flag.Bool("notes", false, "render templates/NOTES.txt instead of the objects")
	dumpValues := flag.Bool("dump-values", false, "print the coalesced values as JSON (what Helm checks against values.schema.json)")
	var valueFiles multiFlag
	flag.Var(&valueFiles, "f", "values file (repeatable, later wins)")
	flag.Parse()
	if *chartDir == "" {
		return errors.New("-chart is required")
	}

	var cm chartMeta
	if err := readYAML(filepath.Join(*chartDir, "Chart.yaml"), &cm); err != nil {
		return err
	}
	values := map[string]interface{}{}
	if err := readYAML(filepath.Join(*chartDir, "values.yaml"), &values); err != nil {
		return err
	}
	for _, vf := range valueFiles {
		user := map[string]interface{}{}
		if err := readYAML(vf, &user); err != nil {
			return err
		}
		values = coalesce(values, user)
	}

	if *dumpValues {
		b, err := json.Marshal(values)
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(append(b, '\n'))
		return err
	}

	r := &renderer{}
	r.root = template.New(cm.Name).Funcs(r.funcs()).Option("missingkey=zero")
	tdir := filepath.Join(*chartDir, "templates")
	entries, err := os.ReadDir(tdir)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			return fmt.Errorf("%s: subdirectories of templates/ are not handled", e.Name())
		}
		b, err := os.ReadFile(filepath.Join(tdir, e.Name()))
		if err != nil {
			return err
		}
		tname := cm.Name + "/templates/" + e.Name()
		if _, err := r.root.New(tname).Parse(string(b)); err != nil {
			return err
		}
		names = append(names, e.Name())
	}
	sort.Strings(names)

	top := map[string]interface{}{
		"Values":  values,
		"Chart":   cm,
		"Release": releaseMeta{Name: *name, Namespace: *ns, Service: "Helm", Revision: 1, IsInstall: true},
		"Capabilities": capabilities{
			KubeVersion: kubeVersion{Version: "v1.30.0", Major: "1", Minor: "30", GitVersion: "v1.30.0"},
			APIVersions: apiVersions{"v1", "apps/v1", "batch/v1", "policy/v1", "networking.k8s.io/v1", "node.k8s.io/v1"},
		},
	}
	var out bytes.Buffer
	for _, n := range names {
		isNotes := n == "NOTES.txt"
		if strings.HasPrefix(n, "_") || isNotes != *notes {
			continue
		}
		tname := cm.Name + "/templates/" + n
		top["Template"] = templateMeta{Name: tname, BasePath: cm.Name + "/templates"}
		var buf bytes.Buffer
		if err := r.root.ExecuteTemplate(&buf, tname, top); err != nil {
			return err
		}
		text := strings.ReplaceAll(buf.String(), "<no value>", "")
		if isNotes {
			out.WriteString(text)
			continue
		}
		// One "# Source:" per non-empty document, as helm template prints them.
		for _, doc := range strings.Split("\n"+text, "\n---") {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", tname, strings.Trim(doc, "\n"))
		}
	}
	_, err = os.Stdout.Write(out.Bytes())
	return err
}

func stripComments(doc string) string {
	var keep []string
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
}
