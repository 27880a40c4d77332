#!/usr/bin/env python3
"""Writes tests/fixtures/phantomwiki-n100-seed1-{articles,onehop}.jsonl from the PhantomWiki
fixture (../shared/fixtures/phantomwiki-n100-seed1/articles.json): the articles in Search-R1
corpus format and one one-hop question per (person, relation) naming that person."""
import json, sys
src = sys.argv[1] if len(sys.argv) > 1 else '../shared/fixtures/phantomwiki-n100-seed1/articles.json'
a = json.load(open(src))
with open('tests/fixtures/phantomwiki-n100-seed1-articles.jsonl', 'w') as f:
    for i, x in enumerate(a):
        f.write(json.dumps({"id": str(i), "contents": '"%s"\n%s' % (x['title'], x['article'])}) + "\n")
attr = {'dob': 'date of birth', 'job': 'occupation', 'hobby': 'hobby', 'gender': 'gender'}
with open('tests/fixtures/phantomwiki-n100-seed1-onehop.jsonl', 'w') as f:
    for i, x in enumerate(a):
        seen = set()
        for fact in x['facts']:
            p = fact.split('(')[0]
            if p in attr:
                q = "What is the %s of %s?" % (attr[p], x['title'])
            else:
                q = "Who is the %s of %s?" % (p, x['title'])
            if q not in seen:
                seen.add(q)
                f.write(json.dumps({"question": q, "article_id": str(i)}) + "\n")
