package compilecache

import "go.uber.org/zap"

func zapPath(p string) zap.Field      { return zap.String("path", p) }
func zapString(k, v string) zap.Field { return zap.String(k, v) }
