"""`roundscope report`'s page: report.json as one HTML page that opens offline.

    python report_page.py OUT/report.json OUT/report.html

(`roundscope report` runs it.) The charts are Plotly's (hover for a value, click a legend entry
to hide a series, a button for a log axis); its JavaScript, 4.6 MB, is written once beside the
page as plotly-VERSION.min.js, so that the page itself stays small and reports in one folder
share it, and loaded after the first screen is painted: it takes longer to run than the page to
draw, so the heat maps (layer by head) are the page's own tables of coloured cells and each
Plotly chart is drawn as it nears the screen. The tables sort on a click (numbers as numbers, names with their
numbers in order) and filter by layer. The page opens with the heads where each failure is
worst, then a section per analysis (a chart by layer, and over steps where there are several).
"""
from __future__ import annotations

import html
import math
import os
import json
import re
import sys
from collections import defaultdict
from decimal import Decimal
from statistics import mean

from . import _report_metrics as rm
from ._report_schema import PROFILE_BINS, ReportError, refuse

# Colour-blind-safe (Okabe-Ito), one per series.
COLOURS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"]
BAD = ' class="bad"'
TABLE_ROWS = 5000  # the every-head table stops here (report.json has them all)
NUMBER = re.compile(r"-?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?", re.I)  # what the page's script reads as a number
ESTIMATED = " (estimated, whole head)"  # an axis of sampled totals scaled to the whole head

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#222;max-width:1280px}
h1{font-size:22px}h2{font-size:17px;margin-top:30px;border-bottom:1px solid #ddd}h3{font-size:15px}
table{border-collapse:collapse;font-size:12.5px;margin:8px 0}
td,th{border:1px solid #ddd;padding:3px 7px;text-align:right}
th{background:#f4f4f4;cursor:pointer;user-select:none;position:sticky;top:0;z-index:1}
th.sorted-up:after{content:" \\25B2"}th.sorted-down:after{content:" \\25BC"}
td.l,th.l{text-align:left}td.bad{background:#fde2dd;color:#8b1a00;font-weight:600}
.chart{width:100%;height:400px;border:1px solid #eee;margin:6px 0}
.note{color:#555;font-size:13px}.se{color:#777;font-size:11px;font-weight:400}
nav ul{columns:3}li.bad{color:#8b1a00}details{margin:6px 0}
#head-view{position:fixed;top:0;right:0;width:460px;max-width:100%;height:100%;overflow:auto;background:#fff;
  border-left:1px solid #ccc;box-shadow:-4px 0 12px rgba(0,0,0,.12);padding:12px 16px;z-index:3;box-sizing:border-box}
#head-view table{width:100%}#head-view td:first-child{text-align:left}#head-view h3{margin:14px 0 4px}
#head-view-close{float:right}tr.viewed td{outline:2px solid #0072B2}
.heat{margin:8px 0 16px}.heat-title{font-weight:600;font-size:13px;margin:4px 0}
table.heat{border-collapse:separate;border-spacing:1px}table.heat td{width:22px;min-width:14px;height:14px;padding:0;
  border:0;cursor:pointer}table.heat th{background:none;cursor:default;font-weight:400;font-size:10px;padding:0 4px;
  border:0;position:static}table.heat td:hover{outline:2px solid #000}
/* the table of every head is laid out only near the screen: 540 rows delayed the first screen by 0.5 s */
.below{content-visibility:auto;contain-intrinsic-size:auto 20000px}
.heat-scale{font-size:11px;color:#555}.heat-bar{display:inline-block;width:160px;height:10px;vertical-align:middle}
"""

# No '<' in it: the page's every '<' opens a tag (tests/fuzz/fuzz_report_page.py holds it to that).
# Sorting the tables, drawing the heat maps and the charts, the per-head view, and telling a test
# what drew: data-charts on <body> is the number of charts, data-drawn how many Plotly finished,
# data-errors any error the page met.
SCRIPT = """
(function(){
  var errors=[];
  function fail(m){errors.push(String(m));document.body.dataset.errors=errors.join(' | ');}
  window.addEventListener('error',function(e){fail(e.message);});
  // Plotly's script (4.6 MB, beside the page) takes a second or more to run: it is loaded after
  // the first screen is painted (this script ends the body: it draws the heat maps and sets up the
  // tables and the head view first), and each Plotly chart is drawn once it is there and the
  // chart comes near the screen.
  // After the next frame is painted; or after 50 ms where no frame comes (a headless browser
  // running on virtual time draws none).
  function afterPaint(f){var done=false;function once(){if(!done){done=true;f();}}
    requestAnimationFrame(function(){setTimeout(once,0);});setTimeout(once,50);}
  var plotly=new Promise(function(ready,missing){
    var src=document.body.dataset.plotly;
    if(!src){missing('no Plotly script named for the page');return;}
    afterPaint(function(){
      var tag=document.createElement('script');tag.src=src;
      tag.addEventListener('load',function(){document.body.dataset.plotlyMs=Math.round(performance.now());ready();});
      tag.addEventListener('error',function(){missing('the Plotly script did not load: '+src);});
      document.head.appendChild(tag);});
  });
  plotly.catch(fail);
  // A cell's value: its data-v (exact), else its text (before any standard error) where that is
  // the number itself.
  function key(td){var v=td.getAttribute('data-v');
    return v!==null?v:td.firstChild&&td.firstChild.nodeType===3?td.firstChild.nodeValue:td.textContent;}
  function num(t){t=t.trim();if(t==='nan')return NaN;if(t==='inf'||t==='-inf')return t==='inf'?Infinity:-Infinity;
    return /^-?([0-9]+[.]?[0-9]*|[.][0-9]+)(e[-+]?[0-9]+)?$/i.test(t)?Number(t):null;}
  function sortBy(th){
    var table=th.closest('table'),body=table.tBodies[0],col=th.cellIndex;
    var up=!th.classList.contains('sorted-up');
    table.querySelectorAll('th').forEach(function(h){h.classList.remove('sorted-up','sorted-down');});
    th.classList.add(up?'sorted-up':'sorted-down');
    var rows=Array.prototype.slice.call(body.rows);
    rows.sort(function(a,b){
      var x=key(a.cells[col]),y=key(b.cells[col]),nx=num(x),ny=num(y);
      // numbers as numbers (NaN past every one), the rest as names with their numbers in order
      var c=nx!==null&&ny!==null?(isNaN(nx)||isNaN(ny)?isNaN(nx)-isNaN(ny):nx===ny?0:nx-ny)
            :x.localeCompare(y,undefined,{numeric:true});
      return up?c:-c;});
    rows.forEach(function(r){body.appendChild(r);});
  }
  document.addEventListener('click',function(e){var th=e.target.closest('th');
    if(th&&!th.closest('table.heat'))sortBy(th);});
  var filter=document.getElementById('layer-filter');
  if(filter)filter.addEventListener('change',function(){
    document.querySelectorAll('#heads-table tbody tr').forEach(function(r){
      r.hidden=filter.value!==''&&r.getAttribute('data-layer')!==filter.value;});});
  var drawing=JSON.parse(document.getElementById('charts').textContent),charts=drawing.charts;
  // The heat maps: a table a map, a cell a head coloured on Viridis from the map's least value to
  // its largest, its value in its title; a click opens the head's view at its worst step.
  function mix(a,b,t){var x=parseInt(a.slice(1),16),y=parseInt(b.slice(1),16),out='#';
    [16,8,0].forEach(function(s){var u=Math.floor(x/Math.pow(2,s))%256,v=Math.floor(y/Math.pow(2,s))%256,
      c=Math.round(u*(1-t)+v*t);
      out+=(c+256).toString(16).slice(1);});return out;}
  function colour(t){var stops=drawing.colours,n=stops.length-1,i=Math.min(n-1,Math.floor(t*n));
    return mix(stops[i],stops[i+1],t*n-i);}
  drawing.heats.forEach(function(h){
    var div=document.getElementById(h.id),values=[];
    h.z.forEach(function(row){row.forEach(function(v){if(v!==null)values.push(v);});});
    var lo=Math.min.apply(null,values),hi=Math.max.apply(null,values);
    var table=document.createElement('table'),head=document.createElement('thead'),tr=document.createElement('tr');
    table.className='heat';head.appendChild(tr);
    var corner=document.createElement('th');corner.textContent='layer \\\\ head';tr.appendChild(corner);
    h.x.forEach(function(x){var th=document.createElement('th');th.textContent=x;tr.appendChild(th);});
    table.appendChild(head);var body=document.createElement('tbody');table.appendChild(body);
    h.y.forEach(function(layer,r){
      var row=document.createElement('tr'),th=document.createElement('th');th.textContent=layer;row.appendChild(th);
      h.z[r].forEach(function(v,c){var td=document.createElement('td');row.appendChild(td);
        if(v===null)return;
        td.style.background=colour(hi===lo?0.5:(v-lo)/(hi-lo));
        td.title='layer '+layer+' head '+h.x[c]+': '+Number(v.toPrecision(4));
        td.dataset.view=drawing.anchors[h.worst[r][c]];});
      body.appendChild(row);});
    div.appendChild(table);
    var scale=document.createElement('p');scale.className='heat-scale';
    var bar=document.createElement('span');bar.className='heat-bar';
    bar.style.background='linear-gradient(to right,'+drawing.colours.join(',')+')';
    scale.appendChild(document.createTextNode(String(Number(lo.toPrecision(4)))+' '));scale.appendChild(bar);
    scale.appendChild(document.createTextNode(' '+String(Number(hi.toPrecision(4)))));
    div.appendChild(scale);
  });
  // The per-head view: a head's every figure in one column, each with its rank among the
  // head-steps and its layer's median, read from the head's row of the table (its data-v values
  // and red marks), opened by any link to the row (the first screen's worst heads, the table's
  // head names, a heat map's cell) or a page address ending in the row's id.
  var meta=JSON.parse(document.getElementById('head-metrics').textContent);
  var profiles=JSON.parse(document.getElementById('head-profiles').textContent);
  // a profile as rm.profile made it: histograms padded back to their bins, the shared parts put back
  function profileOf(id){var p=profiles.heads[id],bins=profiles.bins;
    var out=[0,1].map(function(i){var h=p[i].slice();while(bins>h.length)h.push(0);return h;});
    if(p.length===2)return out;
    var shared=profiles.shared[p[3]];return out.concat([p[2],shared[0],p[4],shared[1]]);}
  var view=document.getElementById('head-view'),viewBody=document.getElementById('head-view-body');
  function value(td){return num(key(td));}
  function badness(m,x){if(isNaN(x))return -Infinity;
    return m.worst==='min'?x:m.worst==='abs'?-Math.abs(x):-x;}
  function cell(tr,text,cls){var td=document.createElement(tr.parentNode&&tr.parentNode.tagName==='THEAD'?'th':'td');
    td.textContent=text;if(cls)td.className=cls;tr.appendChild(td);return td;}
  function drawProfile(profile){
    var gaps=profile[0].map(function(_,i){return profile[0].length-1>i?String(i):i+'+';});
    var binades=profile[1].map(function(_,i){return profile[1].length-1>i?'2^-'+i:'below 2^-'+(i-1);});
    // where fa3-fp8 casts P S to zero with the row's max in view: ln 1024 (+ ln 256 at S = 256)
    [['head-view-gaps','non-sink scores below the row maximum (nats)',gaps,profile[0],
      [[6.93,'S = 1'],[12.48,'S = 256']]],
     ['head-view-p','exact softmax probabilities by binade',binades,profile[1],[]]]
    .forEach(function(c){
      var div=document.createElement('div');div.id=c[0];div.className='chart';div.style.height='260px';
      viewBody.appendChild(div);
      plotly.then(function(){return Plotly.newPlot(div,[{type:'bar',x:c[2],y:c[3],marker:{color:'#0072B2'},
        name:'',hovertemplate:'%{x}: %{y} keys'}],
        {title:{text:c[1],font:{size:12}},margin:{l:50,r:10,t:40,b:40},yaxis:{type:'log',title:{text:'keys'}},
         xaxis:{type:'category'},
         shapes:c[4].map(function(s){return {type:'line',xref:'x',x0:s[0],x1:s[0],yref:'paper',y0:0,y1:1,
           line:{color:'#D55E00',dash:'dot',width:1}};}),
         annotations:c[4].map(function(s){return {xref:'x',x:s[0],yref:'paper',y:1,text:s[1],showarrow:false,
           font:{size:9,color:'#D55E00'}};})},
        {displayModeBar:false,responsive:true});}).then(function(){div.dataset.drawn='1';},fail);
    });
    var note=document.createElement('p');note.className='note';
    note.textContent='From the scores as fa3-fp8 holds Q and K (E4M3), over the visible keys of the rows with a '+
      'key besides the sink'+(document.body.dataset.sampled?' (the sampled rows)':'')+'; dotted: how far below '+
      'the running maximum fa3-fp8 casts P S to zero (ln 1024, and + ln 256 at S = 256).';
    viewBody.appendChild(note);
    if(profile.length===2)return;  // a report written before the view had the rows
    var sinks=profile[2],starts=profile[3],worst=profile[4],run=profile[5];
    var h=document.createElement('h3');h.textContent='The sink, row by row';viewBody.appendChild(h);
    var div=document.createElement('div');div.id='head-view-sink';div.className='chart';div.style.height='220px';
    viewBody.appendChild(div);
    plotly.then(function(){return Plotly.newPlot(div,[{type:'bar',x:starts.map(String),y:sinks,
      marker:{color:'#009E73'},name:'',hovertemplate:'rows from %{x}: %{y}'}],
      {title:{text:'sink mass by query position (rows from each on)',font:{size:12}},
       margin:{l:50,r:10,t:40,b:40},yaxis:{range:[0,1],title:{text:'share'}},
       xaxis:{type:'category',title:{text:'query position'}}},
      {displayModeBar:false,responsive:true});}).then(function(){div.dataset.drawn='1';},fail);
    h=document.createElement('h3');h.textContent='The rows that collapse most';viewBody.appendChild(h);
    var p=document.createElement('p');p.className='note';
    p.textContent='Non-sink keys whose P S fa3-fp8 casts to zero, counted from the held scores against the '+
      'running maximum ('+(run[0]||'?')+' order, S = '+(run[1]===null?'?':run[1])+')'+
      (document.body.dataset.sampled?', among the sampled rows':'')+'.';
    viewBody.appendChild(p);
    if(!worst.length){p.textContent+=' No row loses any.';return;}
    var t=document.createElement('table'),head=document.createElement('thead'),tr=document.createElement('tr');
    head.appendChild(tr);['row','non-sink keys','cast to zero','its sink mass'].forEach(function(c){cell(tr,c);});
    t.appendChild(head);var body=document.createElement('tbody');t.appendChild(body);t.id='head-view-rows';
    worst.forEach(function(r){var tr=document.createElement('tr');body.appendChild(tr);
      cell(tr,String(r[0]));cell(tr,String(r[1]));
      cell(tr,r[2]+' ('+Number((100*r[2]/r[1]).toPrecision(3))+'%)');cell(tr,r[3]===null?'-':String(r[3]));});
    viewBody.appendChild(t);
  }
  // The head's element of O furthest from the exact attention, beside the recipe nearest the
  // kernel on the head's O (rm.worst_element).
  function showWorst(w){
    var h=document.createElement('h3');h.textContent='The worst element of O';viewBody.appendChild(h);
    var p=document.createElement('p');p.className='note';
    p.textContent='The value of the kernel furthest from the exact attention'+
      (document.body.dataset.sampled?' among the sampled rows':'')+', beside '+w[0]+', the recipe that matches '+
      Number((100*w[1]).toPrecision(4))+'% of the O of this head bit for bit (the layer files of report.json keep '+
      'the four worst of each output and recipe).';
    viewBody.appendChild(p);
    var t=document.createElement('table'),head=document.createElement('thead'),tr=document.createElement('tr');
    head.appendChild(tr);['row','column','kernel','exact',w[0],'ulps from it'].forEach(function(c){cell(tr,c);});
    t.appendChild(head);var body=document.createElement('tbody');t.appendChild(body);t.id='head-view-worst';
    tr=document.createElement('tr');body.appendChild(tr);
    w.slice(2).forEach(function(x){cell(tr,x===null?'-':String(x));});
    viewBody.appendChild(t);
  }
  function show(id){
    var row=id?document.getElementById(id):null;
    document.querySelectorAll('tr.viewed').forEach(function(r){r.classList.remove('viewed');});
    if(!row||!row.closest('#heads-table')){view.hidden=true;delete document.body.dataset.view;return;}
    row.classList.add('viewed');
    var rows=Array.prototype.slice.call(document.querySelectorAll('#heads-table tbody tr'));
    var same=rows.filter(function(r){return r.getAttribute('data-layer')===row.getAttribute('data-layer');});
    viewBody.textContent='';
    var title=document.createElement('h2');
    title.textContent='layer '+row.cells[1].textContent+', '+row.cells[2].textContent+', step '+
      row.cells[3].textContent;
    var file=document.createElement('p');file.className='note';file.textContent=row.cells[0].textContent+
      ': every figure of this head-step, its rank among the '+rows.length+' head-steps (1: the worst) and '+
      'the median of the '+same.length+' of its layer.';
    viewBody.appendChild(title);viewBody.appendChild(file);
    var section=null,body=null;
    meta.forEach(function(m,i){
      var td=row.cells[4+i],x=value(td);
      if(m.section!==section){section=m.section;
        var h=document.createElement('h3');h.textContent=m.section_title;viewBody.appendChild(h);
        var t=document.createElement('table'),head=document.createElement('thead'),tr=document.createElement('tr');
        head.appendChild(tr);['figure','value','rank','layer median'].forEach(function(c){cell(tr,c);});
        t.appendChild(head);body=document.createElement('tbody');t.appendChild(body);viewBody.appendChild(t);}
      var tr=document.createElement('tr');body.appendChild(tr);
      cell(tr,m.label+(m.threshold?' (red: '+m.threshold+')':''));
      var v=cell(tr,td.textContent,td.classList.contains('bad')?'bad':'');
      if(x===null){cell(tr,'-');cell(tr,'-');return;}
      var all=rows.map(function(r){return value(r.cells[4+i]);}).filter(function(y){return y!==null;});
      var worse=all.filter(function(y){return badness(m,x)>badness(m,y);}).length;
      cell(tr,(worse+1)+' of '+all.length);
      var mine=same.map(function(r){return value(r.cells[4+i]);}).filter(function(y){return y!==null&&!isNaN(y);})
        .sort(function(a,b){return a-b;});
      cell(tr,mine.length?String(Number(mine[Math.floor(mine.length/2)].toPrecision(4))):'-');
    });
    view.hidden=false;  // shown before its charts are drawn: Plotly sizes them to the view
    if(Object.prototype.hasOwnProperty.call(profiles.heads,id))drawProfile(profileOf(id));
    if(Object.prototype.hasOwnProperty.call(profiles.worst,id))showWorst(profiles.worst[id]);
    document.body.dataset.view=id;
  }
  document.getElementById('head-view-close').addEventListener('click',function(){show(null);});
  document.addEventListener('keydown',function(e){if(e.key==='Escape')show(null);});
  document.addEventListener('click',function(e){var a=e.target.closest('a[href^="#h-"]');
    if(a)show(decodeURIComponent(a.getAttribute('href').slice(1)));
    var td=e.target.closest('table.heat td[data-view]');if(td){location.hash=td.dataset.view;show(td.dataset.view);}});
  function fromAddress(){if(location.hash.indexOf('#h-')===0)show(decodeURIComponent(location.hash.slice(1)));}
  window.addEventListener('hashchange',fromAddress);  // an address typed or the back button
  fromAddress();
  // The Plotly charts, each drawn once Plotly is there and it is within a screen of the view
  // (every one at once for printing, or with ?draw=all in the address). Timings for the tests and
  // docs/performance.md on the body: data-paint-ms (first text painted), data-screen-ms (the first
  // screen drawn: its heat maps and any chart on it), data-plotly-ms (Plotly's script run),
  // data-draw-ms (every chart drawn).
  charts.forEach(function(c){c.data.forEach(function(t){
    if(t.label_index){t.text=t.label_index.map(function(i){return drawing.labels[i];});delete t.label_index;}});});
  document.body.dataset.charts=charts.length;document.body.dataset.drawn=0;
  var logButtons=[{type:'buttons',direction:'left',x:1,y:1.18,xanchor:'right',showactive:true,
    buttons:[{label:'linear',method:'relayout',args:[{'yaxis.type':'linear'}]},
             {label:'log',method:'relayout',args:[{'yaxis.type':'log'}]}]}];
  function paint(){var p=performance.getEntriesByName('first-contentful-paint')[0];
    if(p)document.body.dataset.paintMs=Math.round(p.startTime);}
  var onScreen=charts.filter(function(c){
    return window.innerHeight>document.getElementById(c.id).getBoundingClientRect().top;});
  var screenLeft=onScreen.length;
  function screenDrawn(){afterPaint(function(){document.body.dataset.screenMs=Math.round(performance.now());paint();});}
  if(!screenLeft)screenDrawn();
  function draw(c){
    if(c.started)return;c.started=true;
    plotly.then(function(){
      var layout=Object.assign({margin:{l:60,r:10,t:60,b:50},hovermode:'closest',
        legend:{font:{size:10}},updatemenus:logButtons},c.layout);
      return Plotly.newPlot(c.id,c.data,layout,{displaylogo:false,responsive:true});
    }).then(function(){
      var drawn=Number(document.body.dataset.drawn)+1;document.body.dataset.drawn=drawn;
      if(onScreen.indexOf(c)!==-1&&--screenLeft===0)screenDrawn();
      if(drawn===charts.length){document.body.dataset.drawMs=Math.round(performance.now());paint();}},fail);
  }
  function drawAll(){charts.forEach(draw);}
  window.addEventListener('beforeprint',drawAll);
  if(/[?&]draw=all(&|$)/.test(location.search)||!('IntersectionObserver' in window)){drawAll();return;}
  var near=new IntersectionObserver(function(entries){entries.forEach(function(e){
    if(e.isIntersecting){near.unobserve(e.target);draw(charts.filter(function(c){return c.id===e.target.id;})[0]);}});},
    {rootMargin:'100% 0px'});
  charts.forEach(function(c){near.observe(document.getElementById(c.id));});
})();
"""


def esc(x) -> str:
    """The one escaping of anything a report holds (a shared report.json may be edited by hand):
    every field that reaches the page, as text or in an attribute, goes through it. A lone
    surrogate (JSON's \\ud800), which UTF-8 cannot write, is shown as '?'."""
    return html.escape(str(x).encode("utf-8", "replace").decode("utf-8"), quote=True)


def fmt(x, digits=3) -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and not math.isfinite(x):
        return "NaN" if math.isnan(x) else "Inf" if x > 0 else "-Inf"
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return esc(x)  # not a number where one belongs: shown as the text it is
    if isinstance(x, int):  # JSON's integers have no bound: past 10^15 in Decimal's notation
        return str(x) if abs(x) < 10**15 else f"{Decimal(x):.{digits}g}"
    if not x.is_integer():
        return f"{x:.{digits}g}"
    return str(int(x)) if abs(x) < 1e15 else f"{x:.{digits}g}"


class Page:
    def __init__(self, report, heads, compare):
        self.r, self.compare = report, compare
        self.metrics = rm.metrics(report, heads)
        self.label = rm.head_labels(report)
        self.step = rm.steps(report)
        self.charts = []
        self.heats = []  # the heat maps the page's script draws: numbers only
        self.heads = sorted(heads,
                            key=lambda h: (h.get("layer") if isinstance(h.get("layer"), int) else -1, h["head"],
                                           self.step(h)))
        self.layers = sorted({h.get("layer") if isinstance(h.get("layer"), int) else -1 for h in self.heads})
        self.steps = sorted({self.step(h) for h in self.heads})
        self.sampled = bool(report.get("options", {}).get("rows"))
        self.batch_heads = rm.batch_heads(report)

    def layer(self, h):
        return h.get("layer") if isinstance(h.get("layer"), int) else -1

    def anchor(self, h):
        return esc(f"h-{self.layer(h)}-{h['head']}-{self.step(h)}")

    def chart(self, title, data, x_title, y_title, integer_x=False, **layout) -> str:
        cid = f"chart{len(self.charts)}"
        xaxis: dict[str, object] = {"title": {"text": x_title}}
        if integer_x:  # layers and steps: ticks on whole numbers only, about 20 at most
            xs = [x for trace in data for x in trace.get("x", []) if isinstance(x, int)]
            span = max(xs) - min(xs) if xs else 0
            xaxis.update(tick0=0, dtick=max(1, -(-span // 20)))
        # Plotly draws a subset of HTML in its texts (names, labels, hover text, titles): every
        # string of a chart is escaped as the page's text is (Plotly shows entities as characters)
        self.charts.append({"id": cid, "data": _escaped(data), "layout": _escaped({
            "title": {"text": title, "font": {"size": 13}}, "xaxis": xaxis,
            "yaxis": {"title": {"text": y_title}}, **layout})})
        return f'<div class="chart" id="{cid}"></div>'

    # -- what to look at first -------------------------------------------------------------
    def worst_first(self) -> str:
        items: list[str] = []
        facts: dict[str, list[str]] = {}  # why -> the figures every head-step passes for that reason
        for m in self.metrics:
            valued = [(m.value(h), h) for h in self.heads if m.value(h) is not None]
            bad = [(v, h) for v, h in valued if m.bad(v)]
            if not bad:
                continue
            if m.structural and len(bad) == len(valued):  # the recipe's doing, not a head's
                facts.setdefault(m.structural, []).append(f"{esc(m.label)} ({esc(m.threshold_text())}, "
                                                          f"{len(valued)} of {len(valued)})")
                continue
            order = _worst_first(m)
            # a NaN first: no value at all is worse than any number past the threshold
            top = sorted(bad, key=lambda p: (0, 0.0) if math.isnan(p[0]) else (1, order(p[0])))[:3]
            names = ", ".join(f'<a href="#{self.anchor(h)}">layer {self.layer(h)} {esc(self.label(h))} step '
                              f'{self.step(h)}</a> ({fmt(v, 4)})' for v, h in top)
            items.append(f'<li class="bad">{esc(m.label)} ({esc(m.threshold_text() or "NaN")}): {len(bad)} of '
                         f'{len(valued)} head-steps; worst {names}</li>')
        bias = [s for s in self.r.get("bias_over_steps", []) if len(s.get("steps", [])) >= 5
                and rm.number(s.get("sign_test_p")) is not None and s["sign_test_p"] < 0.05]
        if bias:
            items.append(f'<li class="bad">delta\'s error with one sign over steps (sign test p &lt; 0.05): '
                         f'{len(bias)} head(s), e.g. layer {fmt(bias[0]["layer"])} head {fmt(bias[0]["head"])}</li>')
        items += self.unmatched_kernel()
        known = ('<p class="note">Facts of the recipes, not findings on a head (every head-step past the '
                 'threshold, for a reason the format gives):</p><ul>'
                 + "".join(f"<li>{'; '.join(figures)}: {esc(why)}.</li>" for why, figures in facts.items())
                 + "</ul>") if facts else ""
        if not items:
            return "<h2 id=\"first\">What to look at first</h2><p>No figure crossed its threshold.</p>" + known
        return ("<h2 id=\"first\">What to look at first</h2><p class=\"note\">The heads where each failure is "
                "worst: those past the threshold in brackets, the worst three named.</p><ul>"
                + "".join(items) + "</ul>" + known)

    def nearest(self) -> dict[tuple[str, str], tuple[str, float]]:
        """{(file, output): (recipe, matched share)}: the recipe whose emulation has the most bits
        of the kernel's output (the first on a tie)."""
        best: dict[tuple[str, str], tuple[str, float]] = {}
        for f, recipe, output, o in rm.compare_figures(self.r, self.compare):
            share = o.get("matched", 0) / max(1, o.get("total", 0))
            if (f["file"], output) not in best or share > best[(f["file"], output)][1]:
                best[(f["file"], output)] = (recipe, share)
        return best

    def unmatched_kernel(self) -> list[str]:
        """A finding where even the nearest recipe leaves bits of the kernel's outputs unexplained."""
        nearest = self.nearest()
        missed = {k: v for k, v in nearest.items() if v[1] < 1}
        if not missed:
            return []
        (file, output), (recipe, share) = min(missed.items(), key=lambda kv: kv[1][1])
        files = len({f for f, _ in nearest})
        return [f'<li class="bad">the kernel\'s outputs match no compared recipe bit for bit in '
                f'{len({f for f, _ in missed})} of {files} file(s); worst <a href="#compare">{esc(file)}</a> '
                f'{esc(output)}, nearest {esc(recipe)} ({100 * share:.2f}% of its values): '
                f'<code>roundscope fit {esc(os.path.join(str(self.r.get("dir", "")), str(file)))}</code> searches '
                f'for the recipe that reproduces it</li>']

    # -- one section per analysis ------------------------------------------------------------
    def by_layer_charts(self, section_metrics, title) -> str:
        """A chart by layer for each unit the metrics count in: one unit on an axis."""
        units = list(dict.fromkeys(m.unit for m in section_metrics))
        return "".join(self.by_layer_chart([m for m in section_metrics if m.unit == u],
                                           title if len(units) == 1 else f"{title}: {u}", u) for u in units)

    def by_layer_chart(self, section_metrics, title, unit) -> str:
        data = []
        for i, m in enumerate(section_metrics):
            colour = COLOURS[i % len(COLOURS)]
            # each point's hover text by its head's index in the page's one list of names
            points = [(self.layer(h), m.value(h), i) for i, h in enumerate(self.heads) if rm.finite(m.value(h))]
            if not points:
                continue
            # WebGL past a few thousand points: a model's every head stays responsive.
            data.append({"type": "scattergl" if len(points) > 5000 else "scatter", "mode": "markers",
                         "name": m.label + " (heads)", "legendgroup": m.name,
                         "x": [p[0] for p in points], "y": [p[1] for p in points],
                         "label_index": [p[2] for p in points],
                         "marker": {"color": colour, "size": 5, "opacity": 0.45}, "hovertemplate": "%{text}: %{y}"})
            per_layer = defaultdict(list)
            for x, y, _ in points:
                per_layer[x].append(y)
            xs = sorted(per_layer)
            data.append({"type": "scatter", "mode": "lines+markers", "name": m.label + " (mean)",
                         "legendgroup": m.name, "x": xs, "y": [mean(per_layer[x]) for x in xs],
                         # a prediction dotted: drawn over its measure it leaves that visible
                         "line": {"color": colour, "width": 2, "dash": "dot" if "predicted" in m.name else "solid"}})
        return self.chart(title + ", by layer" + self.undrawn(section_metrics), data, "layer",
                          self.unit_title(section_metrics, unit), integer_x=True) if data else ""

    def undrawn(self, ms) -> str:
        """A chart's note of the figures it cannot draw: NaN and infinite values (the tables and
        the first screen show them)."""
        n = sum(1 for m in ms for h in self.heads if m.value(h) is not None and not rm.finite(m.value(h)))
        return f" ({n} NaN or infinite value(s) not drawn: see the heads' table)" if n else ""

    def unit_title(self, ms, unit) -> str:
        """An axis's title: the unit, marked as a whole-head estimate where sampled rows were scaled."""
        return unit + (ESTIMATED if self.sampled and any(m.total for m in ms) else "")

    def heat_map(self, m) -> str:
        """Layer by head, the figure's mean over the steps: where in the model it sits, at a glance
        (a head is its index within a batch entry; a layer without it, or a head, is left blank).
        Drawn by the page's own script as a table of coloured cells, not by Plotly, so that the first
        screen is drawn before Plotly's script has run; a cell opens the view of its head at its
        worst step."""
        cells: defaultdict[tuple[int, int], list[tuple[float, int]]] = defaultdict(list)
        for i, h in enumerate(self.heads):
            if rm.finite(m.value(h)):
                cells[(self.layer(h), self.batch_heads(h)[1])].append((m.value(h), i))
        if len({layer for layer, _ in cells}) < 2:
            return ""  # one layer: the chart by layer shows it
        heads = sorted({head for _, head in cells})
        order = _worst_first(m)
        z = [[mean(v for v, _ in cells[(layer, head)]) if (layer, head) in cells else None for head in heads]
             for layer in self.layers]
        worst = [[min(cells[(layer, head)], key=lambda p: order(p[0]))[1] if (layer, head) in cells else -1
                  for head in heads] for layer in self.layers]
        hid = f"heat{len(self.heats)}"
        self.heats.append({"id": hid, "x": heads, "y": self.layers, "z": z, "worst": worst})
        return (f'<div class="heat" id="{hid}"><p class="heat-title">{esc(m.label)}: layer by head (mean over '
                f'steps; {esc(m.unit)}){self.undrawn([m])}</p></div>')

    def over_steps_chart(self, m) -> str:
        if len(self.steps) < 2:
            return ""
        data = []
        for i, layer in enumerate(self.layers):
            per_step = defaultdict(list)
            for h in self.heads:
                if self.layer(h) == layer and rm.finite(m.value(h)):
                    per_step[self.step(h)].append(m.value(h))
            xs = sorted(per_step)
            if xs:
                data.append({"type": "scatter", "mode": "lines+markers", "name": f"layer {layer}", "x": xs,
                             "y": [mean(per_step[x]) for x in xs], "line": {"color": COLOURS[i % len(COLOURS)]}})
        return self.chart(m.label + ", over steps (mean over heads)" + self.undrawn([m]), data, "step",
                          self.unit_title([m], m.unit), integer_x=True) if data else ""

    def sections(self) -> str:
        out = []
        for section, title in rm.SECTIONS.items():
            ms = [m for m in self.metrics if m.section == section]
            if not ms:
                continue
            charts = self.heat_map(ms[0]) + self.by_layer_charts(ms, title)
            charts += "".join(self.over_steps_chart(m) for m in ms[:2])
            out.append(f'<h2 id="{section}">{esc(title)}</h2>{self.explain(ms)}{charts}')
        out.append(self.bias_over_steps())
        attribute = [m for m in self.metrics if m.section == "attribute"]
        if attribute:
            out.append('<h2 id="attribute">Attribution: the error of O each recipe makes</h2>'
                       + self.explain(attribute) + self.by_layer_charts(attribute, "relative rms error of O"))
        return "".join(out)

    def explain(self, ms) -> str:
        return ("<p class=\"note\">" + "; ".join(f"<b>{esc(m.label)}</b> ({m.name})" for m in ms) + ".</p>")

    def bias_over_steps(self) -> str:
        series = self.r.get("bias_over_steps", [])
        if not series or max(len(s.get("steps", [])) for s in series) < 2:
            return ""
        data = []
        for i, s in enumerate(series[:64]):
            data.append({"type": "scatter", "mode": "lines+markers", "name": f"layer {s['layer']} head {s['head']}",
                         "x": s["steps"], "y": [rm.number(v) for v in s["cumulative"]],
                         "line": {"color": COLOURS[i % len(COLOURS)]}})
        return ('<h2 id="bias_steps">delta\'s error accumulated over steps</h2><p class="note">The error of '
                'delta = rowsum(dO * O), summed over rows, with the kernel\'s O, step after step: one sign '
                'over many steps is the bias that reaches the weights' + (" (the first 64 heads)" if len(series) > 64
                                                                          else "") + '.</p>'
                + self.chart("cumulative error of delta", data, "step",
                             "sum of coefficients" + (ESTIMATED if self.sampled else ""), integer_x=True))

    # -- tables -------------------------------------------------------------------------
    @staticmethod
    def error_span(e) -> str:
        return "" if e is None else f' <span class="se">\u00b1 {fmt(e, 2)}</span>'

    def cell(self, m, h) -> str:
        v = m.value(h)
        if v is None:
            return "<td>-</td>"
        text, error = fmt(v, 4), self.error_span(m.error(h))
        # the value for sorting and the head view: the text where it is the value, else data-v
        exact = NUMBER.fullmatch(text) is not None and float(text) == v
        attribute = "" if exact else f' data-v="{v!r}"'
        return f'<td{attribute}{BAD if m.bad(v) else ""}>{text}{error}</td>'

    def head_rows(self, heads) -> str:
        head = ("<table id=\"heads-table\"><thead><tr><th class=\"l\">file</th><th>layer</th>"
                "<th class=\"l\">head</th><th>step</th>"
                + "".join(f'<th title="{esc(m.label)}">{esc(m.name)}</th>' for m in self.metrics)
                + "</tr></thead><tbody>")
        rows = []
        for h in heads:
            rows.append(f'<tr id="{self.anchor(h)}" data-layer="{self.layer(h)}"><td class="l">{esc(h["file"])}</td>'
                        f'<td>{self.layer(h)}</td>'
                        f'<td class="l"><a href="#{self.anchor(h)}">{esc(self.label(h))}</a></td>'
                        f'<td>{self.step(h)}</td>'
                        + "".join(self.cell(m, h) for m in self.metrics) + "</tr>")
        return head + "".join(rows) + "</tbody></table>"

    def heads_table(self) -> str:
        shown = self.heads[:TABLE_ROWS]
        more = (f" The first {TABLE_ROWS} of {len(self.heads)} are shown; report.json has every one."
                if len(self.heads) > TABLE_ROWS else "")
        legend = "".join(f"<li><b>{esc(m.name)}</b>: {esc(m.label)}"
                         + (f" (red: {esc(m.threshold_text())})" if m.threshold else "") + "</li>"
                         for m in self.metrics)
        options = "".join(f'<option value="{layer}">layer {layer}</option>' for layer in self.layers)
        return ('<h2 id="heads">Every head and step</h2><p class="note">Click a column to sort it; red cells are '
                f'worth a look.{more}</p><details><summary>the columns</summary><ul>{legend}</ul></details>'
                f'<p class="note">Show <select id="layer-filter"><option value="">every layer</option>{options}'
                '</select></p><div class="below">' + self.head_rows(shown) + "</div>")

    def compare_section(self) -> str:
        rows: list[str] = []
        histogram: defaultdict[tuple[str, str], defaultdict[int, int]] = defaultdict(lambda: defaultdict(int))
        nearest = self.nearest()
        for f, recipe, output, o in rm.compare_figures(self.r, self.compare):
            matched, total = o.get("matched", 0), max(1, o.get("total", 0))
            rel = rm.number(o.get("rel_rms"))
            # red only where even the nearest recipe misses bits: the others are there for their error
            is_nearest = nearest.get((f["file"], output), (None,))[0] == recipe
            rows.append(f'<tr><td class="l">{esc(f["file"])}</td><td>{fmt(f.get("layer"))}</td>'
                        f'<td>{fmt(f.get("step"))}</td><td class="l">{esc(recipe)}{" (nearest)" if is_nearest else ""}'
                        f'</td><td class="l">{esc(output)}</td>'
                        f'<td data-v="{rel!r}">{fmt(rel, 4)}{self.error_span(o.get("rel_rms_error"))}</td>'
                        f'<td data-v="{matched / total!r}"{BAD if matched < total and is_nearest else ""}>'
                        f'{matched}/{total} ({100 * matched / total:.1f}%)</td><td>{fmt(o.get("max_ulp"))}</td></tr>')
            for b in o.get("ulp_histogram", []):
                histogram[(recipe, output)][b["ulps"]] += b["count"]
        skipped = [f'<tr><td class="l">{esc(file)}</td><td class="l">{esc(recipe)}</td>'
                   f'<td class="l">{esc(why)}</td></tr>' for file, recipe, why in rm.compare_skipped(self.compare)]
        not_compared = ('<p class="note">Not compared (the kernel wrote other dtypes than the recipe does; pass a '
                        'recipe with its formats, or --set o_format=...):</p><table><thead><tr><th class="l">file</th>'
                        '<th class="l">recipe</th><th class="l">why</th></tr></thead><tbody>' + "".join(skipped)
                        + "</tbody></table>") if skipped else ""
        if not rows:
            return ('<h2 id="compare">The kernel\'s outputs against each recipe</h2>' + not_compared) if skipped else ""
        data = []
        for i, ((recipe, output), bins) in enumerate(sorted(histogram.items())):
            labels = sorted(bins, key=_bucket_order)
            data.append({"type": "bar", "name": f"{recipe}: {output}", "x": labels, "y": [bins[b] for b in labels],
                         "marker": {"color": COLOURS[i % len(COLOURS)]}})
        order = sorted({x for trace in data for x in trace["x"]}, key=_bucket_order)
        return ('<h2 id="compare">The kernel\'s outputs against each recipe</h2><p class="note">Relative rms error '
                'against the exact attention, and the bits equal to the recipe\'s emulation, red where even the '
                'nearest recipe (the one with the most) leaves some unexplained. The chart: how far '
                'the kernel\'s values are from the emulation\'s, in units in the last place, over every file.</p>'
                + self.chart("distance from the emulation (all files)", data, "ulps", "values", barmode="group",
                             xaxis={"title": {"text": "ulps"}, "type": "category", "categoryorder": "array",
                                    "categoryarray": order})
                + '<table><thead><tr><th class="l">file</th><th>layer</th><th>step</th><th class="l">recipe</th>'
                '<th class="l">output</th><th>rel. rms</th><th>bits equal</th><th>max ulp</th></tr></thead><tbody>'
                + "".join(rows) + "</tbody></table>" + not_compared)

    def head_metrics(self) -> str:
        """The table's figure columns, in order, for the per-head view (its script reads the row)."""
        titles = {**rm.SECTIONS, "attribute": "Attribution: the relative rms error of O"}
        meta = [{"label": m.label, "section": m.section, "section_title": titles.get(m.section, m.section),
                 "threshold": m.threshold_text(), "worst": m.worst} for m in self.metrics]
        # shown by textContent, so as they are; no markup characters left to end or open anything
        return json.dumps(meta).replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")

    def head_profiles(self) -> str:
        """{"heads": {row id: profile}, "shared": [...], "worst": {row id: element}} for the heads of
        the table that have a profile (rm.profile; the per-head view draws them): each histogram
        without its trailing zeros, and the position bins' starts and the collapsing rows' run, the
        same for most heads, once in "shared" with the profile holding its index; and each head's
        element of O furthest from the truth (rm.worst_element). Shown as text; '&', '<' and '>'
        written as JSON escapes, so no markup can be in it."""
        shared: dict[str, int] = {}
        heads = {}
        for h in self.heads[:TABLE_ROWS]:
            p = h.get("profile")
            if not p:
                continue
            p = [_trimmed(p[0]), _trimmed(p[1])] + p[2:]
            if len(p) == 6:
                key = json.dumps([p[3], p[5]])
                p = p[:3] + [shared.setdefault(key, len(shared)), p[4]]
            heads[html.unescape(self.anchor(h))] = p
        worst = {html.unescape(self.anchor(h)): h["worst"] for h in self.heads[:TABLE_ROWS] if h.get("worst")}
        data = {"bins": PROFILE_BINS, "heads": heads, "shared": [json.loads(k) for k in shared], "worst": worst}
        return json.dumps(data, separators=(",", ":")).replace("&", "\\u0026").replace("<", "\\u003c") \
            .replace(">", "\\u003e")

    def sampling_note(self) -> str:
        return _sampling_note(self.r.get("options", {}))

    def render(self, plotly_file: str) -> str:
        """The page, loading Plotly from `plotly_file` beside it (no library: its name is empty)."""
        r = self.r
        recipes = ", ".join(esc(x["name"]) for x in r.get("options", {}).get("recipes", []))
        body = self.worst_first() + self.sections() + self.heads_table() + self.compare_section()
        toc = "".join(f'<li><a href="#{i}">{esc(t)}</a></li>' for i, t in _headings(body))
        # the heads' names once, for the points' hover texts (a chart's label_index), escaped as every string
        # of a chart is (Plotly draws a subset of HTML)
        names = _escaped([f"layer {self.layer(h)} {self.label(h)} step {self.step(h)}" for h in self.heads])
        from plotly.colors import sequential  # the heat maps' colour scale, Plotly's own Viridis

        anchors = [html.unescape(self.anchor(h)) for h in self.heads]  # 'h-' and three integers
        charts = json.dumps({"labels": names, "charts": self.charts, "heats": self.heats, "anchors": anchors,
                             "colours": sequential.Viridis}, allow_nan=False).replace("</", "<\\/")
        batched = any(f.get("batch", 1) > 1 for f in r.get("files", []))
        return (
            "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>roundscope report</title>"
            f"<style>{STYLE}</style>"
            + "</head><body" + (' data-sampled="1"' if self.sampled else "")
            + (f' data-plotly="{esc(plotly_file)}"' if plotly_file else "") + ">"
            + f"<h1>roundscope report: {esc(r.get('dir', ''))}</h1><p class=\"note\">{len(r.get('files', []))} "
            f"file(s), {len(self.heads)} head-step(s) over {len(self.layers)} layer(s) and {len(self.steps)} step(s). "
            f"Recipes: {recipes}; sink: the first {fmt(r.get('options', {}).get('k_sink', 1))} key(s). "
            + ("Heads of a batched dump are named by batch and head. " if batched else "")
            + self.sampling_note()
            + "Every figure is in report.json beside this page.</p>"
            f"<nav><h2>Contents</h2><ul>{toc}</ul></nav>{body}"
            '<aside id="head-view" hidden><button id="head-view-close" title="Escape">close</button>'
            '<div id="head-view-body"></div></aside>'
            f"<script type=\"application/json\" id=\"charts\">{charts}</script>"
            f"<script type=\"application/json\" id=\"head-metrics\">{self.head_metrics()}</script>"
            f"<script type=\"application/json\" id=\"head-profiles\">{self.head_profiles()}</script>"
            f"<script>{SCRIPT}</script>"
            "</body></html>\n")


def _worst_first(m):
    """A sort key putting m's worst values first (its worst end: the largest, the smallest or the
    furthest from zero)."""
    return {"max": lambda v: -v, "min": lambda v: v, "abs": lambda v: -abs(v)}[m.worst]


def _trimmed(counts):
    """A histogram without its trailing zeros (the page pads it back)."""
    n = len(counts)
    while n and counts[n - 1] == 0:
        n -= 1
    return counts[:n]


def _escaped(x):
    """x with every string in it (values, not keys) through esc."""
    if isinstance(x, str):
        return esc(x)
    if isinstance(x, dict):
        return {k: _escaped(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_escaped(v) for v in x]
    return x


def _bucket_order(label) -> tuple[float, str]:
    """An ulp bucket's place on its axis: '0', '1', '2-3', ..., '>N', then 'nan'."""
    numbers = [int(n) for n in re.findall(r"\d+", str(label))]
    if not numbers:
        return float("inf"), str(label)
    return numbers[0] + (0.5 if str(label).startswith(">") else 0), str(label)


def _sampling_note(options) -> str:
    rows = options.get("rows")
    if not rows:
        return ""
    return (f"<b>Sampled:</b> each head's analyses ran on {fmt(rows)} of its query rows "
            f"(seed {fmt(options.get('seed', 0))}; "
            "a head with no more runs whole; leakage on its first tokens as always). A count or sum over rows "
            "(rows, the sum of delta's coefficients) is the sample's scaled to the whole head, an estimate; every "
            "other figure is over the sampled rows; &plusmn; is one standard error from random groups of the "
            "sample, where the figure has one (a maximum or a minimum has none: the sample only bounds it). ")


def _headings(body):
    for m in re.finditer(r'<h2 id="([^"]+)">(.*?)</h2>', body):
        yield m.group(1), html.unescape(re.sub("<[^>]+>", "", m.group(2)))


def main(argv):
    program = "roundscope._report_page"
    if len(argv) != 3:
        refuse(program, "usage: python -m roundscope._report_page REPORT.json OUT.html")
    try:
        from plotly.offline import get_plotlyjs
    except ImportError:
        refuse(program, "no plotly in this Python (tools/setup.sh installs it in .venv)")
    if os.path.abspath(argv[1]) == os.path.abspath(argv[2]) or (
            os.path.exists(argv[2]) and os.path.exists(argv[1]) and os.path.samefile(argv[1], argv[2])):
        refuse(program, f"{argv[2]} is the report it reads; write the page elsewhere")
    from .dump import replacing  # the package's one atomic writer

    import plotly

    library = f"plotly-{plotly.__version__}.min.js"
    beside = os.path.join(os.path.dirname(os.path.abspath(argv[2])), library)
    try:
        text = Page(*rm.read_report(argv[1])).render(library)
        script = get_plotlyjs().encode("utf-8")
        if os.path.exists(beside):  # a library an earlier page wrote: the same bytes, or not ours
            with open(beside, "rb") as f:
                if f.read() != script:
                    raise ReportError(f"{beside} is there and is not plotly {plotly.__version__}'s script; move it "
                                      "away")
    except (ReportError, OSError) as e:  # nothing written
        refuse(program, e)
    if not os.path.exists(beside):
        with replacing(beside, "wb") as (f, _):
            f.write(script)
    with replacing(argv[2], "wb") as (f, _):  # whole or not at all; UTF-8 whatever the locale, as the page says
        f.write(text.encode("utf-8"))


if __name__ == "__main__":
    main(sys.argv)
