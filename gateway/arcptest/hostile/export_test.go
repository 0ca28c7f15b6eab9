package hostile

// ReadClientFrame exposes the slowloris modes' frame reader to the fuzz
// test.
var ReadClientFrame = readClientFrame
