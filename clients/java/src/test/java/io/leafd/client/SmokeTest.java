package io.leafd.client;
import org.junit.jupiter.api.Test;
import static org.junit.jupiter.api.Assertions.*;
class SmokeTest { @Test void runs() { assertEquals(2, 1 + 1); } }
