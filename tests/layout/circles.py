#!/usr/bin/env python3
"""The core's files call each other in circles of at most MAX files.

The file-level call graph of libstrata's objects: file A -> file B when A
refers to a global symbol B defines (nm). Its strongly connected components
are the circles: a component of more than MAX files fails the test, naming
its files and the calls that close it. Usage: circles.py OBJDIR [MAX]."""
import collections, os, subprocess, sys

def graph(root):
    defs, refs = {}, collections.defaultdict(set)
    names = []
    for d, _, fs in os.walk(root):
        for f in fs:
            if not f.endswith('.o'):
                continue
            o = os.path.join(d, f)
            name = os.path.relpath(o, root)[:-2]  # "run/train.c"
            names.append(name)
            out = subprocess.run(['nm', o], capture_output=True, text=True,
                                 check=True).stdout
            for line in out.splitlines():
                p = line.split()
                if len(p) == 3 and p[1] in 'TDBR':
                    defs[p[2]] = name
                elif len(p) == 2 and p[0] == 'U':
                    refs[name].add(p[1])
    g = {n: set() for n in names}
    why = collections.defaultdict(list)
    for a, syms in refs.items():
        for s in syms:
            b = defs.get(s)
            if b and b != a:
                g[a].add(b)
                why[(a, b)].append(s)
    return g, why

def components(g):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in sorted(g):
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = counter; counter += 1
        stack.append(root); on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter; counter += 1
                    stack.append(w); on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop(); on.discard(w); comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out

def main():
    root, most = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3
    g, why = graph(root)
    if len(g) < 20:
        print(f'{root}: only {len(g)} objects; not the core?')
        return 1
    bad = 0
    for comp in sorted(components(g), key=len, reverse=True):
        if len(comp) < 2:
            continue
        print(f'circle of {len(comp)}: {" ".join(comp)}')
        if len(comp) > most:
            bad = 1
            for a in comp:
                for b in comp:
                    if (a, b) in why:
                        print(f'  {a} -> {b}: {", ".join(sorted(why[(a, b)]))}')
    print(f'{len(g)} files; circles of at most {most} files: '
          f'{"no" if bad else "yes"}')
    return bad

sys.exit(main())
