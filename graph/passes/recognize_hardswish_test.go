package passes_test

// hardSwishCases: HardSwish as Paddle exports it (÷6) and as ·(1/6), and near misses.
var hardSwishCases = []recognizeCase{
	{"hardswish x·clip(x+3, 0, 6)/6",
		`func @main(%x: f32[2,3,4]) {
  const %three: f32[] = [3]
  const %zero: f32[] = [0]
  const %six: f32[] = [6]
  %a = Add(%x, %three) : f32[2,3,4]
  %c = Clip(%a, %zero, %six) : f32[2,3,4]
  %m = Mul(%x, %c) : f32[2,3,4]
  %y = Div(%m, %six) : f32[2,3,4]
  return %y
}`, `func @main(%x: f32[2,3,4]) {
  %y = HardSwish(%x) : f32[2,3,4]
  return %y
}`},
	{"hardswish (3+x), clip·x and ·(1/6)",
		`func @main(%x: f32[2,3,4]) {
  const %three: f32[1] = [3]
  const %zero: f32[] = [0]
  const %six: f32[] = [6]
  const %sixth: f32[] = [0.16666667]
  %a = Add(%three, %x) : f32[2,3,4]
  %c = Clip(%a, %zero, %six) : f32[2,3,4]
  %m = Mul(%c, %x) : f32[2,3,4]
  %y = Mul(%sixth, %m) : f32[2,3,4]
  return %y
}`, `func @main(%x: f32[2,3,4]) {
  %y = HardSwish(%x) : f32[2,3,4]
  return %y
}`},
	{"hardswish whose clip result has another reader stays",
		`func @main(%x: f32[2,3,4]) {
  const %three: f32[] = [3]
  const %zero: f32[] = [0]
  const %six: f32[] = [6]
  %a = Add(%x, %three) : f32[2,3,4]
  %c = Clip(%a, %zero, %six) : f32[2,3,4]
  %m = Mul(%x, %c) : f32[2,3,4]
  %y = Div(%m, %six) : f32[2,3,4]
  return %y, %c
}`, ""},
	{"x·clip(x+3, 0, 6)/5 stays",
		`func @main(%x: f32[2,3,4]) {
  const %three: f32[] = [3]
  const %zero: f32[] = [0]
  const %six: f32[] = [6]
  const %five: f32[] = [5]
  %a = Add(%x, %three) : f32[2,3,4]
  %c = Clip(%a, %zero, %six) : f32[2,3,4]
  %m = Mul(%x, %c) : f32[2,3,4]
  %y = Div(%m, %five) : f32[2,3,4]
  return %y
}`, ""},
	{"6/(x·clip(x+3, 0, 6)) stays",
		`func @main(%x: f32[2,3,4]) {
  const %three: f32[] = [3]
  const %zero: f32[] = [0]
  const %six: f32[] = [6]
  %a = Add(%x, %three) : f32[2,3,4]
  %c = Clip(%a, %zero, %six) : f32[2,3,4]
  %m = Mul(%x, %c) : f32[2,3,4]
  %y = Div(%six, %m) : f32[2,3,4]
  return %y
}`, ""},
	{"z·clip(x+3, 0, 6)/6 of another tensor z stays",
		`func @main(%x: f32[2,3,4], %z: f32[2,3,4]) {
  const %three: f32[] = [3]
  const %zero: f32[] = [0]
  const %six: f32[] = [6]
  %a = Add(%x, %three) : f32[2,3,4]
  %c = Clip(%a, %zero, %six) : f32[2,3,4]
  %m = Mul(%z, %c) : f32[2,3,4]
  %y = Div(%m, %six) : f32[2,3,4]
  return %y
}`, ""},
}
