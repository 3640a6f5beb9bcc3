package leafd_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestDocLinks: every relative link and #anchor in README.md,
// CONTRIBUTING.md and docs/*.md resolves. A link to a file needs the file
// (or directory); a link with an anchor into a Markdown file needs a heading
// whose GitHub slug is the anchor. Links with a scheme (https:, mailto:) are
// not followed. So that documentation cannot rot silently when a file or a
// heading is renamed.
func TestDocLinks(t *testing.T) {
	files := []string{"README.md", "CONTRIBUTING.md"}
	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, docs...)
	if len(docs) < 5 {
		t.Fatalf("docs/ holds %d Markdown files (%v): is the test running at the repository's root?", len(docs), docs)
	}

	anchors := map[string]map[string]bool{} // Markdown file → its anchors
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		doc, err := readMarkdown(path)
		if err != nil {
			return nil, err
		}
		anchors[path] = doc.anchors
		return doc.anchors, nil
	}

	checked := 0
	for _, file := range files {
		doc, err := readMarkdown(file)
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		for _, l := range doc.links {
			if hasScheme(l.target) {
				continue
			}
			checked++
			path, anchor, _ := strings.Cut(l.target, "#")
			target := file
			if path != "" {
				target = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", file, l.line, l.target, filepath.ToSlash(target))
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			a, err := anchorsOf(target)
			if err != nil {
				t.Errorf("%s:%d: link %q: %v", file, l.line, l.target, err)
				continue
			}
			if !a[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", file, l.line, l.target, filepath.ToSlash(target), anchor)
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d relative links found in %v: did the link syntax change?", checked, files)
	}
}

// TestSlug pins the heading slugs GitHub makes, which TestDocLinks relies
// on.
func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"4. HTTP API":                            "4-http-api",
		"`GET /api/state`":                       "get-apistate",
		"A tag's row is locked":                  "a-tags-row-is-locked",
		"Over real connections: `cmd/leafbench`": "over-real-connections-cmdleafbench",
		"How much per tag: `metrics.per_tag`":    "how-much-per-tag-metricsper_tag",
		"Moving from [Leaf](https://x)":          "moving-from-leaf",
		"**Bold** words":                         "bold-words",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

type mdLink struct {
	line   int
	target string
}

type mdDoc struct {
	links   []mdLink
	anchors map[string]bool
}

var (
	// An inline link or image: [text](target) or [text](target "title").
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// A reference definition: [name]: target
	refDef = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	// Inline code, whose text is not Markdown.
	codeSpan = regexp.MustCompile("`+[^`]*`+")
	// An ATX heading.
	heading = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	// An HTML anchor: <a id="x"> or <a name="x">.
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	scheme     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
)

func hasScheme(target string) bool { return scheme.MatchString(target) }

// readMarkdown returns the links of a Markdown file and the anchors of its
// headings, outside fenced code blocks.
func readMarkdown(path string) (*mdDoc, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	doc := &mdDoc{anchors: map[string]bool{}}
	seen := map[string]int{}
	var fence string // the fence that opened the code block, "" outside one
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " \t")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			s := slug(m[2])
			if k := seen[s]; k > 0 {
				doc.anchors[fmt.Sprintf("%s-%d", s, k)] = true
			} else {
				doc.anchors[s] = true
			}
			seen[s]++
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			doc.anchors[m[1]] = true
		}
		text := codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(text, -1) {
			doc.links = append(doc.links, mdLink{line: n, target: m[1]})
		}
		if m := refDef.FindStringSubmatch(text); m != nil {
			doc.links = append(doc.links, mdLink{line: n, target: m[1]})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if fence != "" {
		return nil, fmt.Errorf("a code block opened with %s is never closed", fence)
	}
	return doc, nil
}

// slug returns the anchor GitHub gives a heading: its text (links reduced
// to their text, emphasis and code marks dropped) in lower case, with every
// character but letters, digits, spaces, hyphens and underscores removed and
// spaces turned into hyphens.
func slug(h string) string {
	h = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(h, "$1")
	h = strings.ReplaceAll(h, "**", "")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// TestDocsAboutTheProduct: the documentation speaks of the product, not of
// the work that made it: no "issue 7", no link to a file outside the
// repository that a clone does not have. The files that point readers at
// the contract (the API description, the deploy files, the migrations'
// comments) must point at docs/contract.md, not at a design document
// ("SPEC section 3") that a clone does not have.
func TestDocsAboutTheProduct(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "README.md", "CONTRIBUTING.md", "Dockerfile", "docker-compose.yml", filepath.Join("api", "openapi.yaml"))
	sql, err := filepath.Glob(filepath.Join("migrations", "*", "*.sql"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, sql...)
	banned := regexp.MustCompile(`(?i)\bissues? #?[0-9]+|\.\./shared|\bSPEC(\.md| section)`)
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := banned.FindString(line); m != "" {
				t.Errorf("%s:%d: %q: write about the product, and link only files of the repository", file, i+1, m)
			}
		}
	}
}
