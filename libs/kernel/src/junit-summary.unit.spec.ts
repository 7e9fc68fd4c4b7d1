import { describe, expect, it } from 'vitest';
import type { JunitSummary } from './junit-summary.operation.js';
import { junitSummary, sumJunit } from './junit-summary.operation.js';

function summary(xml: string | Uint8Array): JunitSummary {
  const result = junitSummary(xml);
  if (!result.ok) throw new Error(`expected a JUnit report: ${result.reason}`);
  return result.summary;
}

const PYTEST = `<?xml version="1.0" encoding="utf-8"?>
<testsuites name="pytest tests">
  <testsuite name="pytest" errors="1" failures="1" skipped="1" tests="5" time="0.052" timestamp="2026-11-30T01:02:03" hostname="h">
    <testcase classname="tests.test_math" name="test_add" time="0.001" />
    <testcase classname="tests.test_math" name="test_sub" time="0.001">
      <failure message="assert 1 == 2">def test_sub():
&gt;       assert 1 == 2
E       assert 1 == 2</failure>
    </testcase>
    <testcase classname="tests.test_math" name="test_div" time="0.001">
      <error message="failed on setup with &quot;fixture 'db' not found&quot;">file tests/test_math.py, line 9</error>
    </testcase>
    <testcase classname="tests.test_math" name="test_skip" time="0.000">
      <skipped type="pytest.skip" message="not on linux">tests/test_math.py:12: not on linux</skipped>
    </testcase>
    <testcase classname="tests.test_math" name="test_mul" time="0.001"><system-out>4</system-out></testcase>
  </testsuite>
</testsuites>`;

const SUREFIRE = `<?xml version="1.0" encoding="UTF-8"?>
<testsuite xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:noNamespaceSchemaLocation="https://maven.apache.org/surefire/maven-surefire-plugin/xsd/surefire-test-report.xsd" version="3.0" name="com.example.CalculatorTest" time="0.04" tests="4" errors="0" skipped="1" failures="1">
  <properties>
    <property name="java.version" value="21"/>
    <property name="user.dir" value="/work"/>
  </properties>
  <testcase name="adds" classname="com.example.CalculatorTest" time="0.001"/>
  <testcase name="divides" classname="com.example.CalculatorTest" time="0.002">
    <failure message="expected: &lt;2&gt; but was: &lt;3&gt;" type="org.opentest4j.AssertionFailedError"><![CDATA[org.opentest4j.AssertionFailedError: expected: <2> but was: <3>
	at com.example.CalculatorTest.divides(CalculatorTest.java:20)
</testcase><testcase name="fake"/>]]></failure>
    <system-out><![CDATA[<testcase name="not a test"/>]]></system-out>
  </testcase>
  <testcase name="flaky" classname="com.example.CalculatorTest" time="0.003">
    <flakyFailure message="first try failed" type="java.lang.AssertionError"/>
  </testcase>
  <testcase name="later" classname="com.example.CalculatorTest" time="0">
    <skipped message="@Disabled"/>
  </testcase>
</testsuite>`;

describe('junitSummary', () => {
  it('Given a pytest report, when summarised, then each outcome is counted once', () => {
    expect(summary(PYTEST)).toEqual({
      tests: 5,
      passed: 2,
      failed: 2,
      failures: 1,
      errors: 1,
      skipped: 1,
      suites: 1,
      well_formed: true,
    });
  });

  it('Given a Maven Surefire report, when summarised, then CDATA and flaky reruns do not count as tests or failures', () => {
    expect(summary(SUREFIRE)).toEqual({
      tests: 4,
      passed: 2,
      failed: 1,
      failures: 1,
      errors: 0,
      skipped: 1,
      suites: 1,
      well_formed: true,
    });
  });

  it('Given nested suites with aggregate attributes, when summarised, then test cases are counted, not the attributes twice', () => {
    const xml = `<testsuites tests="3" failures="1">
      <testsuite name="outer" tests="3" failures="1">
        <testsuite name="inner-a" tests="2" failures="1">
          <testcase name="a1"/>
          <testcase name="a2"><failure/></testcase>
        </testsuite>
        <testsuite name="inner-b" tests="1"><testcase name="b1"/></testsuite>
      </testsuite>
    </testsuites>`;
    expect(summary(xml)).toMatchObject({ tests: 3, passed: 2, failed: 1, failures: 1, suites: 3 });
  });

  it('Given suites that carry only counts, when summarised, then the outermost suites are summed', () => {
    const xml = `<testsuites>
      <testsuite name="a" tests="10" failures="2" errors="1" skipped="3"/>
      <testsuite name="b" tests="5" failures="0" errors="0" disabled="1"><testsuite name="nested" tests="99"/></testsuite>
    </testsuites>`;
    expect(summary(xml)).toMatchObject({ tests: 15, failures: 2, errors: 1, skipped: 4, failed: 3, passed: 8, suites: 3 });
  });

  it('Given a root with counts and no suites, when summarised, then the root attributes are used', () => {
    expect(summary('<testsuites tests="4" failures="1"/>')).toMatchObject({ tests: 4, failed: 1, passed: 3, suites: 0 });
  });

  it('Given junk count attributes, when summarised, then they count as zero', () => {
    expect(summary('<testsuite tests="many" failures="-1" errors="1e3" skipped=" 2 "/>')).toMatchObject({
      tests: 0,
      failures: 0,
      errors: 0,
      skipped: 2,
      passed: 0,
    });
  });

  it('Given a truncated report, when summarised, then the cases seen are counted and it is not well formed', () => {
    const xml = '<testsuite><testcase name="a"/><testcase name="b"><failure message="x"';
    expect(summary(xml)).toMatchObject({ tests: 2, passed: 1, failed: 1, well_formed: false });
    const open = '<testsuite><testcase name="a"><failure>boom</failure>';
    expect(summary(open)).toMatchObject({ tests: 1, failed: 1, failures: 1, well_formed: false });
  });

  it('Given a test case with both a failure and an error, when summarised, then it counts once, as a failure', () => {
    expect(summary('<testsuite><testcase name="t"><error/><failure/></testcase></testsuite>')).toMatchObject({
      tests: 1,
      failures: 1,
      errors: 0,
      failed: 1,
    });
  });

  it('Given a failure element that is not a direct child of a test case, when summarised, then it is not a failure', () => {
    expect(summary('<testsuite><testcase name="t"><system-out><failure/></system-out></testcase></testsuite>')).toMatchObject({
      tests: 1,
      passed: 1,
    });
  });

  it('Given namespaced elements, comments and processing instructions, when summarised, then local names count', () => {
    const xml = `<?xml version="1.0"?><!-- <testcase name="commented"/> --><j:testsuite xmlns:j="urn:x"><j:testcase name="a"><j:skipped/></j:testcase><?pi <testcase/> ?></j:testsuite>`;
    expect(summary(xml)).toMatchObject({ tests: 1, skipped: 1, well_formed: true });
  });

  it('Given a DOCTYPE that declares external and expanding entities, when summarised, then nothing is resolved or expanded', () => {
    const xml = `<?xml version="1.0"?>
<!DOCTYPE testsuite [
  <!ENTITY xxe SYSTEM "file:///etc/passwd">
  <!ENTITY lol "lol">
  <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
  <!ENTITY fake "<testcase name='injected'/>">
]>
<testsuite name="&xxe;" tests="&lol2;"><testcase name="&xxe;"/>&fake;</testsuite>`;
    expect(summary(xml)).toMatchObject({ tests: 1, passed: 1, well_formed: true });
  });

  it('Given bytes with invalid UTF-8, when summarised, then the report is still read', () => {
    const bytes = new Uint8Array([...new TextEncoder().encode('<testsuite><testcase name="'), 0xff, 0xfe, ...new TextEncoder().encode('"/></testsuite>')]);
    expect(summary(bytes)).toMatchObject({ tests: 1, passed: 1 });
  });

  it('Given stray end tags and junk in tags, when summarised, then they are skipped', () => {
    const xml = '<testsuite></nope><testcase name="a" ! junk><failure/></testcase>< <testcase name="b" broken=></testcase></testsuite></testsuite>';
    expect(summary(xml)).toMatchObject({ tests: 2, well_formed: false });
  });

  it.each([
    ['<html><body>not a report</body></html>', /root element is <html>/],
    ['', /no root element/],
    ['just text, no tags', /no root element/],
    ['<?xml version="1.0"?><!-- only a comment -->', /no root element/],
  ])('Given %j, when summarised, then it is not a JUnit report', (xml, reason) => {
    const result = junitSummary(xml);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.reason).toMatch(reason);
  });

  it('Given a hostile deeply nested document, when summarised, then it finishes in linear time', () => {
    const depth = 200_000;
    const xml = `<testsuite>${'<a>'.repeat(depth)}${'</zz>'.repeat(depth)}<testcase name="x"/>${'</a>'.repeat(depth)}</testsuite>`;
    const started = performance.now();
    expect(summary(xml)).toMatchObject({ tests: 1 });
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  it('sums several reports', () => {
    const total = sumJunit([summary(PYTEST), summary(SUREFIRE)]);
    expect(total).toEqual({ tests: 9, passed: 4, failed: 3, failures: 2, errors: 1, skipped: 2, suites: 2, well_formed: true });
    expect(sumJunit([summary(PYTEST), summary('<testsuite><testcase>')]).well_formed).toBe(false);
  });
});
