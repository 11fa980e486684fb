// The HTML layout, escaping, formatting and inline SVG (html.h).
#include <algorithm>
#include <cstdio>
#include <ctime>

#include "kiln/common/encoding.h"
#include "kiln/common/hash.h"
#include "kiln/web/html.h"

namespace kiln::web {

namespace {

// The length of the bidirectional control character (U+061C, U+200E,
// U+200F, U+202A to U+202E, U+2066 to U+2069) starting at `s[i]`, or 0.
size_t bidiControlAt(std::string_view s, size_t i) {
  auto at = [&](size_t k) {
    return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u;
  };
  if (at(0) == 0xD8 && at(1) == 0x9C) return 2;
  if (at(0) != 0xE2) return 0;
  unsigned b1 = at(1), b2 = at(2);
  if (b1 == 0x80 && (b2 == 0x8E || b2 == 0x8F || (b2 >= 0xAA && b2 <= 0xAE)))
    return 3;
  if (b1 == 0x81 && b2 >= 0xA6 && b2 <= 0xA9) return 3;
  return 0;
}

// "U+202E" of the UTF-8 sequence `seq` (2 or 3 bytes).
std::string codePointName(std::string_view seq) {
  auto b = [&](size_t k) { return static_cast<unsigned>(
                               static_cast<unsigned char>(seq[k])); };
  unsigned cp = seq.size() == 2 ? ((b(0) & 0x1F) << 6) | (b(1) & 0x3F)
                                : ((b(0) & 0x0F) << 12) |
                                      ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", cp);
  return buf;
}

}  // namespace

std::string htmlEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); i++) {
    if (size_t n = bidiControlAt(s, i)) {
      out += "[" + codePointName(s.substr(i, n)) + "]";
      i += n - 1;
      continue;
    }
    switch (char c = s[i]) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string htmlName(std::string_view name, size_t maxChars) {
  size_t cut = 0, chars = 0;
  while (cut < name.size() && chars < maxChars) {
    cut++;
    while (cut < name.size() && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80)
      cut++;
    chars++;
  }
  if (cut == name.size()) return htmlEscape(name);
  return "<span title=\"" + htmlEscape(name) + "\">" +
         htmlEscape(name.substr(0, cut)) + "…</span>";
}

std::string formatTime(int64_t ms) {
  if (ms <= 0) return "—";
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string formatDuration(int64_t ms) {
  if (ms < 0) return "—";
  int64_t s = ms / 1000;
  char buf[48];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%lldm %02llds",
                  static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%lldh %02lldm",
                  static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60));
  return buf;
}

std::string formatBytes(int64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[u]);
  return buf;
}

std::string svgBars(const std::string& title, const std::vector<double>& values,
                    const std::vector<std::string>& labels, double max) {
  constexpr int kWidth = 480, kHeight = 80, kGap = 2;
  if (max <= 0)
    for (double v : values) max = std::max(max, v);
  std::string out = "<svg class=\"chart\" role=\"img\" viewBox=\"0 0 " +
                    std::to_string(kWidth) + " " + std::to_string(kHeight) +
                    "\" width=\"" + std::to_string(kWidth) + "\" height=\"" +
                    std::to_string(kHeight) + "\"><title>" +
                    htmlEscape(title) + "</title>";
  out += "<rect class=\"axis\" x=\"0\" y=\"" + std::to_string(kHeight - 1) +
         "\" width=\"" + std::to_string(kWidth) + "\" height=\"1\"/>";
  size_t n = values.size();
  for (size_t i = 0; i < n; ++i) {
    double w = double(kWidth) / double(n);
    int h = max > 0 ? int(values[i] / max * (kHeight - 4)) : 0;
    char rect[160];
    std::snprintf(rect, sizeof rect,
                  "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\">",
                  w * double(i), kHeight - 1 - h, std::max(1.0, w - kGap), h);
    out += rect;
    out += "<title>" + htmlEscape(i < labels.size() ? labels[i] : "") +
           "</title></rect>";
  }
  return out + "</svg>";
}

namespace {

constexpr const char* kStyle = R"CSS(
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f7f8fa}
header{background:#1d2330;color:#fff;padding:.6em 1.2em;display:flex;gap:1.2em;align-items:center;flex-wrap:wrap}
header a{color:#dfe6f3;text-decoration:none}header a.brand{font-weight:700;color:#fff}
header form{margin-left:auto}header input{padding:.25em .5em;border-radius:4px;border:0;min-width:18em}
main{padding:1em 1.4em;max-width:1200px}
h1{font-size:1.4em;margin:.2em 0 .6em;overflow-wrap:anywhere}h2{font-size:1.1em;margin:1.4em 0 .5em}
table{border-collapse:collapse;background:#fff;margin:.3em 0 1em;width:100%}
th,td{text-align:left;padding:.3em .6em;border-bottom:1px solid #e3e6ec;vertical-align:top}
th{background:#eef1f6;font-weight:600}
td.num,th.num{text-align:right}code,.mono{font-family:ui-monospace,monospace;font-size:.92em}
.st{display:inline-block;padding:0 .45em;border-radius:3px;font-size:.88em;font-weight:600;color:#fff}
.st-success{background:#2e7d32}.st-queued{background:#6b7280}.st-running{background:#1565c0}
.st-failed,.st-dependency-failed,.st-aborted,.st-timed-out,.st-cached-failure,.st-log-limit-exceeded,
.st-output-limit-exceeded,.st-failed-with-output,.st-not-deterministic,.st-unsupported,
.st-out-of-memory,.st-process-limit-exceeded,.st-disk-limit-exceeded{background:#c62828}
.st-cancelled{background:#8d6e63}
.chart rect{fill:#c62828}.chart rect.axis{fill:#9aa3b2}.chart.lat rect{fill:#1565c0}
.chart.idle rect{fill:#ef6c00}.lat .chart rect{fill:#1565c0}
.size .chart rect{fill:#2e7d32}.closure .chart rect{fill:#6a1b9a}.cards{display:flex;gap:1em;flex-wrap:wrap}
.card{background:#fff;border:1px solid #e3e6ec;border-radius:6px;padding:.6em .9em;min-width:10em}
.card b{font-size:1.3em;display:block}.muted{color:#6b7280}.pager{margin:.4em 0 1.2em}
.pager a{margin-right:1em}pre.log{background:#10141c;color:#e6e6e6;padding:.8em;overflow:auto;max-height:40em;font-size:.85em}
nav.tabs a{margin-right:1em}nav.tabs a.on{font-weight:700;text-decoration:none;color:#1d2330}
form.op{display:inline-block;margin-right:.6em}
)CSS";

// Appends server-sent log lines to #log while the build runs; the page
// works without it (the log is rendered at load and downloadable). Its
// text is set as text, never parsed as HTML.
constexpr const char* kLiveScript = R"JS(
(function(){var pre=document.getElementById('log');if(!pre||!window.EventSource)return;
var es=new EventSource(pre.dataset.live);
es.onmessage=function(e){pre.textContent+=e.data+'\n';pre.scrollTop=pre.scrollHeight;};
es.addEventListener('end',function(e){es.close();var s=document.getElementById('status');
if(s)s.textContent=e.data;});})();
)JS";

// 'sha256-<base64>' of an inline script's or style's text, for the CSP.
std::string cspHash(std::string_view text) {
  return "'sha256-" +
         base64Encode(hashString(HashAlgo::kSha256, text).bytes()) + "'";
}

}  // namespace

std::string liveLogScript() {
  return std::string("<script>") + kLiveScript + "</script>";
}

const std::string& contentSecurityPolicy() {
  static const std::string policy =
      "default-src 'none'; style-src " + cspHash(kStyle) + "; script-src " +
      cspHash(kLiveScript) +
      "; img-src 'self'; connect-src 'self'; form-action 'self'; "
      "base-uri 'none'; frame-ancestors 'none'";
  return policy;
}

std::string htmlPage(const std::string& title, const std::string& body) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<meta name=\"viewport\" content=\"width=device-width, "
         "initial-scale=1\"><title>" +
         htmlEscape(title) + " — kiln</title><style>" + kStyle +
         "</style></head><body><header><a class=\"brand\" "
         "href=\"/\">kiln</a><a href=\"/projects\">Projects</a><a "
         "href=\"/queue\">Queue</a><a href=\"/workers\">Workers</a>"
         "<form action=\"/search\" method=\"get\"><input name=\"q\" "
         "type=\"search\" placeholder=\"job, .drv or output path\" "
         "aria-label=\"Search\"></form></header><main><h1>" +
         htmlName(title, 160) + "</h1>\n" + body + "\n</main></body></html>\n";
}

std::string renderError(int status, const std::string& message) {
  return htmlPage("Error " + std::to_string(status),
                  "<p>" + htmlEscape(message) + "</p><p><a href=\"/\">Back to "
                  "the overview</a></p>");
}

std::string renderBadge(const std::string& statusName) {
  std::string text = statusName.empty()   ? "none"
                     : statusName == "success" ? "passing"
                     : statusName == "queued"  ? "queued"
                                               : "failing";
  std::string color = text == "passing"  ? "#2e7d32"
                      : text == "failing" ? "#c62828"
                                          : "#6b7280";
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"98\" "
         "height=\"20\" role=\"img\" aria-label=\"build: " + text +
         "\"><title>build: " + text +
         "</title><rect width=\"40\" height=\"20\" fill=\"#555\"/><rect "
         "x=\"40\" width=\"58\" height=\"20\" fill=\"" + color +
         "\"/><g fill=\"#fff\" font-family=\"Verdana,sans-serif\" "
         "font-size=\"11\"><text x=\"6\" y=\"14\">build</text><text x=\"46\" "
         "y=\"14\">" + text + "</text></g></svg>";
}

}  // namespace kiln::web
