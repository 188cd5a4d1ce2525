#!/usr/bin/env node
import { main } from '../src/main.ts'

void main()
