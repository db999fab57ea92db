#!/usr/bin/env python3
"""trace-waterfall.py TRACE_JSON OUT_HTML

Draws one trace, as Jaeger's query API returns it
(GET /api/traces/<trace id>), as an HTML waterfall: each span under its
parent, its time on a common scale, and its main attributes. It made
docs/img/trace-plan-turn.png (then `chromium --headless --screenshot`),
because the Jaeger all-in-one built from the Go module proxy serves no UI.
"""
import html
import json
import sys

KEEP = {'gen_ai.agent.name', 'gen_ai.request.model', 'gen_ai.tool.name', 'gen_ai.usage.input_tokens',
        'gen_ai.usage.output_tokens', 'planwright.step.number', 'planwright.step.status', 'planwright.plan.status',
        'planwright.tool.effect', 'planwright.tool.outcome', 'http.response.status_code', 'planwright.run.kind'}
COLORS = {'POST': '#7a8ca3', 'run': '#8e7cc3', 'invoke_agent': '#6aa84f', 'chat': '#e69138',
          'execute_tool': '#3d85c6', 'plan': '#c27ba0', 'step': '#cc4125'}
STYLE = ('body{font:13px system-ui,sans-serif;margin:16px;color:#222}h1{font-size:16px;margin:0 0 4px}'
         'p{margin:0 0 12px;color:#555}.r{display:flex;align-items:center;height:22px;border-bottom:1px solid #eee}'
         '.n{width:420px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}.t{flex:1;position:relative;height:14px}'
         '.b{position:absolute;height:14px;border-radius:2px}.a{width:330px;color:#666;font-size:11px;white-space:nowrap;'
         'overflow:hidden;text-overflow:ellipsis;padding-left:8px}')


def main(src, dst):
    trace = json.load(open(src))['data'][0]
    spans = trace['spans']
    ids = {s['spanID'] for s in spans}

    def parent(s):
        for r in s.get('references', []):
            if r['refType'] == 'CHILD_OF' and r['spanID'] in ids:
                return r['spanID']
        return None

    kids = {}
    for s in spans:
        kids.setdefault(parent(s), []).append(s)
    for v in kids.values():
        v.sort(key=lambda s: s['startTime'])
    t0 = min(s['startTime'] for s in spans)
    t1 = max(s['startTime'] + s['duration'] for s in spans)
    rows = []

    def walk(p, depth):
        for s in kids.get(p, []):
            rows.append((depth, s))
            walk(s['spanID'], depth + 1)

    walk(None, 0)
    out = ['<html><head><meta charset="utf-8"><style>%s</style></head><body>' % STYLE,
           "<h1>A plan turn's trace, as Jaeger stores it</h1><p>trace %s · %d spans · %.0f ms · service planwright</p>"
           % (trace['traceID'], len(spans), (t1 - t0) / 1000)]
    for depth, s in rows:
        name = s['operationName']
        left = (s['startTime'] - t0) / (t1 - t0) * 100
        width = max(s['duration'] / (t1 - t0) * 100, 0.3)
        attrs = ' '.join('%s=%s' % (t['key'].split('.')[-1], t['value']) for t in s['tags'] if t['key'] in KEEP)
        out.append('<div class="r"><div class="n" style="padding-left:%dpx">%s <span style="color:#888">%.1f ms</span></div>'
                   '<div class="t"><div class="b" style="left:%.2f%%;width:%.2f%%;background:%s"></div></div>'
                   '<div class="a">%s</div></div>'
                   % (depth * 14, html.escape(name), s['duration'] / 1000, left, width,
                      COLORS.get(name.split(' ')[0], '#999'), html.escape(attrs)))
    out.append('</body></html>')
    open(dst, 'w').write(''.join(out))


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2])
